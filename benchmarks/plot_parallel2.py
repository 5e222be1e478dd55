"""Draw the Parallel II figures from the recorded benchmark results (no MPI needed).

    python benchmarks/plot_parallel2.py

* ``docs/figures/pipeline_bubble.png``: the bubble measured (bench_pipeline.py, 2 and 4
  ranks) against micro-batch count, beside the theory (p-1)/(vm+p-1) and the simulation
  with the measured op and message times;
* ``docs/figures/tensor_parallel_comm.png``: per layer, bytes each rank sends per step
  and the time its collectives took (bench_tensor_parallel.py, 2 and 4 ranks);
* ``docs/figures/pipeline_schedules.png``: GPipe, 1F1B and interleaved 1F1B for 4 ranks and
  8 micro-batches, simulated (backward = 2 x forward).
"""
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
FIGURES = os.path.join(ROOT, "docs", "figures")
RESULTS = os.path.join(HERE, "results")


def load(name):
    path = os.path.join(RESULTS, name)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def bubble_figure(Figure):
    fig = Figure(figsize=(10, 3.6))
    for i, p in enumerate((2, 4)):
        ax = fig.add_subplot(1, 2, i + 1)
        rec = load(f"bench_pipeline_{p}.json")
        if rec is None:
            continue
        ms = np.geomspace(1, 16, 50)
        ax.plot(ms, (p - 1) / (ms + p - 1), "k-", lw=1, label="theory (p-1)/(m+p-1)")
        ax.plot(ms, (p - 1) / (2 * ms + p - 1), "k:", lw=1, label="theory, interleaved v=2")
        for schedule, color in (("gpipe", "C0"), ("1f1b", "C1"), ("interleaved", "C2")):
            rows = [r for r in rec["results"] if r["schedule"] == schedule]
            if not rows:
                continue
            m = [r["m"] for r in rows]
            ax.plot(m, [r["measured_bubble"] for r in rows], "o-", color=color,
                    label=f"{schedule} measured")
            ax.plot(m, [r["simulated_bubble_with_latency"] for r in rows], "x--",
                    color=color, alpha=0.6, label=f"{schedule} simulated")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("micro-batches m")
        ax.set_ylabel("bubble (idle fraction)")
        ax.set_ylim(0, 1)
        ax.set_title(f"{p} ranks ({rec['date']}, loaded 2-core machine)", fontsize=9)
        if i == 0:
            ax.legend(fontsize=6)
    return fig


def comm_figure(Figure):
    fig = Figure(figsize=(10, 3.8))
    ax1, ax2 = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    width = 0.4
    for j, p in enumerate((2, 4)):
        rec = load(f"bench_tensor_parallel_{p}.json")
        if rec is None:
            continue
        layers = [f"{r['layer'].replace('transformer.', '')} ({r['phase'][0]})"
                  for r in rec["layers"]]
        x = np.arange(len(layers)) + (j - 0.5) * width
        ax1.bar(x, [r["wire_bytes"] / 1024 for r in rec["layers"]], width,
                label=f"{p} ranks")
        ax2.bar(x, [r["seconds"] * 1e3 for r in rec["layers"]], width, label=f"{p} ranks")
    for ax, label in ((ax1, "KiB sent per rank per step"),
                      (ax2, "ms in the collective (waiting included)")):
        ax.set_xticks(np.arange(len(layers)))
        ax.set_xticklabels(layers, rotation=70, fontsize=6, ha="right")
        ax.set_ylabel(label, fontsize=8)
        ax.legend(fontsize=7)
    fig.suptitle("tensor-parallel GPT-mini: all-reduces per layer (f: forward, b: backward)",
                 fontsize=9)
    return fig


def schedules_figure(Figure):
    from lezero import parallel
    from lezero.parallel.pipeline.draw import plot_timeline
    fig = Figure(figsize=(10, 6.5))
    for i, sched in enumerate((parallel.gpipe(4, 8), parallel.one_f_one_b(4, 8),
                               parallel.interleaved_one_f_one_b(4, 8, 2))):
        ax = fig.add_subplot(3, 1, i + 1)
        cost = 0.5 if sched.chunks > 1 else 1.0          # a chunk is half a stage
        plot_timeline(parallel.simulate(sched, cost, 2 * cost), ax=ax)
        ax.set_xlim(0, 36)
    fig.tight_layout()
    return fig


def main():
    from matplotlib.figure import Figure

    from lezero.parallel.pipeline.draw import save_figure
    os.makedirs(FIGURES, exist_ok=True)
    for name, make in (("pipeline_bubble.png", bubble_figure),
                       ("tensor_parallel_comm.png", comm_figure),
                       ("pipeline_schedules.png", schedules_figure)):
        fig = make(Figure)
        fig.tight_layout()
        save_figure(fig, os.path.join(FIGURES, name))
        print("wrote", os.path.join("docs", "figures", name))


if __name__ == "__main__":
    main()
