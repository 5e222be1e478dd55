"""Project GPT-3 (175 B) on 128 nodes: the best (dp, tp, pp) by the 3D cost model.

    python benchmarks/bench_3d_projection.py          # no MPI: a model, not a measurement
    python benchmarks/bench_3d_projection.py --record # also docs/parallel.md's block

The node: 8 A100 80 GB with NVLink/NVSwitch (300 GB/s per GPU each way, 75% achieved) and
8 x 200 Gb/s HDR InfiniBand (25 GB/s per GPU, 80% achieved); 60% of the 312 TFLOP/s bf16
peak sustained by the model's arithmetic.  GPT-3: 96 layers of width 12288, 96 heads,
2048 tokens, a batch of 1536 sequences, full activation recomputation.  The terms and
their sources are in ``_cost_model_3d.py``.  Prints the best plans, the best for each
tensor size, named alternatives, and how the answer moves with the assumptions; writes
benchmarks/results/bench_3d_projection.json.
"""
import dataclasses
import datetime
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from _cost_model_3d import (Cluster, Model, Plan, best_of, days, describe,  # noqa: E402
                            fmt_time, search, step)
from _record import run_main  # noqa: E402

DESIGN_CARD = 0.92


def row(plan, s):
    return (f"{describe(plan):<30}{s['micro_batches']:>5}{fmt_time(s['step']):>9}"
            f"{s['bubble'] / s['step']:>8.1%}{s['tensor'] / s['step']:>8.1%}"
            f"{(s['pipeline'] + s['data_exposed']) / s['step']:>9.1%}"
            f"{s['memory'] / 1e9:>8.1f}{s['efficiency']:>8.1%}{s['mfu']:>7.1%}")


HEADER = (f"{'plan':<30}{'m':>5}{'step':>9}{'bubble':>8}{'tensor':>8}{'p2p+dp':>9}"
          f"{'GB':>8}{'eff':>8}{'MFU':>7}")


def variants():
    """How the best plan moves with the assumptions."""
    base = Cluster()
    return {
        "as stated": (base, Model()),
        "one 100 Gb/s NIC per node": (dataclasses.replace(base, net_bytes_per_s=12.5e9 * 0.8
                                                          / 8), Model()),
        "no recomputation (memory allowing)": (base, Model()),
        "batch 512 sequences": (base, dataclasses.replace(Model(), batch=512)),
        "H100-like node (3x compute, 2x links)": (dataclasses.replace(
            base, peak_flops=3 * 312e12, nvlink_bytes_per_s=2 * base.nvlink_bytes_per_s,
            net_bytes_per_s=2 * base.net_bytes_per_s), Model()),
    }


def main():
    cluster, model = Cluster(), Model()
    feasible, refused = search(cluster, model)
    print(f"== GPT-3 {model.params / 1e9:.1f} B on {cluster.nodes} nodes x "
          f"{cluster.gpus_per_node} GPUs (the cost model; {len(feasible)} feasible plans, "
          f"{refused} refused for memory)")
    print(HEADER)
    for plan, s in feasible[:8]:
        print(row(plan, s))
    print("\nthe best plan for each tensor size:")
    for tp in (1, 2, 4, 8, 16):
        got = best_of(feasible, tp=tp)
        print(row(*got) if got else f"tp={tp}: nothing fits in memory")
    print("\nnamed alternatives:")
    for name, plan in (("data parallel only", Plan(1024, 1, 1)),
                       ("Megatron-style tp=8 pp=16, 1F1B", Plan(8, 8, 16)),
                       ("tp=8 pp=8", Plan(16, 8, 8)),
                       ("tp=16 across two nodes", Plan(8, 16, 8))):
        s = step(cluster, model, plan)
        fits = "" if s["memory"] <= 0.9 * cluster.memory_bytes else "  (does not fit)"
        print(f"{name:<34}{row(plan, s)}{fits}")
    best_plan, best = feasible[0]
    print(f"\nbest: {describe(best_plan)}: {best['efficiency']:.1%} efficiency (MFU "
          f"{best['mfu']:.1%}), {fmt_time(best['step'])} per step, {days(model, best):.0f} "
          f"days for 300 B tokens -- beside the design card's {DESIGN_CARD:.0%}")
    print("\nhow the best plan moves with the assumptions:")
    out_variants = {}
    for name, (c, mdl) in variants().items():
        recompute = not name.startswith("no recomputation")
        got = [(p, s) for p, s in search(c, mdl)[0] if p.recompute == recompute] \
            if recompute else _no_recompute(c, mdl)
        if not got:
            print(f"  {name:<40} nothing fits")
            continue
        p, s = got[0]
        out_variants[name] = {"plan": dataclasses.asdict(p), "efficiency": s["efficiency"],
                              "mfu": s["mfu"], "step_s": s["step"]}
        print(f"  {name:<40}{describe(p):<30}{s['efficiency']:>7.1%}  MFU {s['mfu']:.1%}")
    record = {"date": datetime.date.today().isoformat(),
              "command": "python benchmarks/bench_3d_projection.py",
              "cluster": dataclasses.asdict(cluster), "model": dataclasses.asdict(model),
              "best": {"plan": dataclasses.asdict(best_plan), **best},
              "top": [{"plan": dataclasses.asdict(p), **s} for p, s in feasible[:8]],
              "variants": out_variants, "design_card": DESIGN_CARD}
    from lezero.utils.files import atomic_write
    out = os.path.join(HERE, "results", "bench_3d_projection.json")
    atomic_write(out, json.dumps(record, indent=1))
    print(f"wrote {os.path.relpath(out, os.path.dirname(HERE))}")


def _no_recompute(cluster, model):
    from _cost_model_3d import plans
    got = []
    for p in plans(cluster, model):
        p = dataclasses.replace(p, recompute=False)
        s = step(cluster, model, p)
        if s["memory"] <= 0.9 * cluster.memory_bytes:
            got.append((p, s))
    return sorted(got, key=lambda ps: ps[1]["step"])


if __name__ == "__main__":
    run_main(main)
