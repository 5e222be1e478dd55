"""Pipeline bubble, measured, simulated and in theory, for several micro-batch counts.

    python benchmarks/bench_pipeline.py                # relaunches itself: mpiexec -n 2
    python benchmarks/bench_pipeline.py --ranks 4      # mpiexec -n 4 (2 cores: oversubscribed)
    python benchmarks/bench_pipeline.py --report FILE  # re-print a recorded run
    python benchmarks/bench_pipeline.py --quick --record   # docs/parallel.md's block

One BLAS/Numba thread per rank.  The model: one stage per rank, each stage two
``Linear(W, W)`` + tanh, a fixed micro-batch of R rows, so every forward (and every
backward) costs the same and the theory applies: GPipe and 1F1B leave (p-1)/(m+p-1) of
the time idle.  For each schedule and m, in alternating rounds: the bubble *measured*
from the ops' own timings (an op's time starts when its input has arrived, so waiting is
bubble), the bubble *simulated* from the same schedule with the measured forward,
backward and message times, and the theory.  The interleaved schedule runs the same model
with each stage cut into two chunks of one layer.  Also: LeZero against PyTorch for one
stage's forward + backward (rank 0, the compute a pipeline step is made of).

Results go to benchmarks/results/bench_pipeline_<p>.json; docs/parallel.md reads them.
"""
import datetime
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402

WIDTH, ROWS = 1024, 32
MICRO = (1, 2, 4, 8, 16)


def stage(width):
    from lezero import nn
    return nn.Sequential(nn.Linear(width, width), nn.Tanh(), nn.Linear(width, width),
                         nn.Tanh())


def model(p, width):
    import lezero as lz
    from lezero import nn
    lz.manual_seed(0)
    layers = []
    for _ in range(p):
        layers += list(stage(width)._modules.values())
    return nn.Sequential(*layers)


def loss_fn(y, t):
    import lezero.functions as F
    return F.mean(y * y)


def run_one(world, schedule, m, steps):
    """Measured and simulated bubble of ``schedule`` with ``m`` micro-batches."""
    from lezero import parallel
    p = world.size
    chunks = 2 if schedule == "interleaved" else 1        # the same model, each stage cut
    pipe = parallel.Pipeline(model(p, WIDTH), world, m, schedule, chunks=chunks,
                             balance=[4 // chunks] * (p * chunks))
    x = np.random.default_rng(1).standard_normal((m * ROWS, WIDTH)).astype(np.float32)
    pipe.step(x, x, loss_fn)                               # warm-up
    bubbles, makespans, f_times, b_times = [], [], [], []
    for _ in range(steps):
        pipe.zero_grad()
        world.barrier()
        pipe.step(x, x, loss_fn)
        tl = pipe.measured_timeline()
        bubbles.append(tl.bubble)
        makespans.append(tl.makespan)
        f_times += [e - s for o, (s, e) in tl.times.items() if o.action == "F"]
        b_times += [e - s for o, (s, e) in tl.times.items() if o.action == "B"]
    tf, tb = float(np.median(f_times)), float(np.median(b_times))
    sim = parallel.simulate(pipe.schedule, tf, tb, 0.0)
    latency = message_latency(world, x[:ROWS].copy())
    sim_c = parallel.simulate(pipe.schedule, tf, tb, latency)
    return {"schedule": schedule, "m": m, "chunks": chunks,
            "measured_bubble": float(np.median(bubbles)),
            "bubble_range": [float(min(bubbles)), float(max(bubbles))],
            "simulated_bubble": sim.bubble, "simulated_bubble_with_latency": sim_c.bubble,
            "theory": parallel.bubble_theory(schedule, p, m, chunks),
            "forward_s": tf, "backward_s": tb, "step_s": float(np.median(makespans)),
            "simulated_step_s": sim_c.makespan, "message_s": latency,
            "peak_activations": sim.peak_activations}


def message_latency(world, activation, reps=20):
    """One-way time of a stage-to-stage message (header + array) between ranks 0 and 1,
    from ping-pongs through the pipeline's own transport (median)."""
    from lezero.parallel.pipeline.transport import StageLink
    if world.size < 2:
        return 0.0
    link, times = StageLink(world), []
    for i in range(reps):
        world.barrier()
        t0 = time.perf_counter()
        if world.rank == 0:
            link.send(activation, 1, 7)
            link.recv(1, 8)
        elif world.rank == 1:
            link.recv(0, 7)
            link.send(activation, 0, 8)
        link.flush()
        times.append((time.perf_counter() - t0) / 2)
    return float(world.bcast(np.array([np.median(times[2:])]), 0)[0])


def stage_vs_torch(world, rounds=7):
    """Rank 0: one stage's forward + backward on one micro-batch, LeZero and PyTorch."""
    if world.rank != 0:
        return None
    import torch

    import lezero as lz
    from _common import interleaved_best
    torch.set_num_threads(1)
    ours = stage(WIDTH)
    theirs = torch.nn.Sequential(torch.nn.Linear(WIDTH, WIDTH), torch.nn.Tanh(),
                                 torch.nn.Linear(WIDTH, WIDTH), torch.nn.Tanh())
    x = np.random.default_rng(2).standard_normal((ROWS, WIDTH)).astype(np.float32)
    xt = torch.tensor(x)

    def lezero_step():
        y = ours(lz.Variable(x))
        lz.functions.mean(y * y).backward()

    def torch_step():
        y = theirs(xt)
        (y * y).mean().backward()

    best = interleaved_best([lezero_step, torch_step], rounds=rounds)
    return {"lezero_s": best[0], "torch_s": best[1], "ratio": best[0] / best[1]}


def measure(world, quick):
    steps, rounds = (2, 1) if quick else (3, 2)
    schedules = ["gpipe", "1f1b"] + (["interleaved"] if WIDTH % 2 == 0 else [])
    got = {}
    for _ in range(rounds):
        for schedule in schedules:
            for m in MICRO:
                if schedule == "interleaved" and m % world.size:
                    continue
                got.setdefault((schedule, m), []).append(run_one(world, schedule, m, steps))
    rows = []
    for (schedule, m), runs in got.items():
        row = dict(runs[0])
        for k in ("measured_bubble", "simulated_bubble", "simulated_bubble_with_latency",
                  "forward_s", "backward_s", "step_s", "simulated_step_s", "message_s"):
            row[k] = float(np.median([r[k] for r in runs]))
        row["bubble_range"] = [min(r["bubble_range"][0] for r in runs),
                               max(r["bubble_range"][1] for r in runs)]
        rows.append(row)
    return {"date": datetime.date.today().isoformat(), "ranks": world.size,
            "command": f"python benchmarks/bench_pipeline.py --ranks {world.size}"
                       + (" --quick" if quick else ""),
            "width": WIDTH, "rows_per_micro_batch": ROWS, "results": rows,
            "stage_vs_torch": stage_vs_torch(world)}


def report(record):
    p = record["ranks"]
    print(f"== pipeline bubble on {p} ranks, {record['date']} (stages: 2 x Linear("
          f"{record['width']}) + tanh, {record['rows_per_micro_batch']} rows per "
          "micro-batch; the machine is shared and loaded)")
    print("bubble: theory (p-1)/(vm+p-1); simulated with the measured op times and free "
          "messages; simulated with the measured message time; measured (median, range)")
    print(f"{'schedule':<12}{'m':>3}{'theory':>8}{'sim':>7}{'sim+msg':>8}{'measured':>9}"
          f"{'(range)':>10}{'F ms':>7}{'B ms':>7}{'msg ms':>7}{'step ms':>8}{'sim ms':>7}"
          f"{'peak act':>10}")
    for r in record["results"]:
        lo, hi = r["bubble_range"]
        print(f"{r['schedule']:<12}{r['m']:>3}{r['theory']:>8.1%}{r['simulated_bubble']:>7.1%}"
              f"{r['simulated_bubble_with_latency']:>8.1%}{r['measured_bubble']:>9.1%}"
              f"{f'{lo:.0%}-{hi:.0%}':>10}{r['forward_s'] * 1e3:>7.2f}"
              f"{r['backward_s'] * 1e3:>7.2f}{r['message_s'] * 1e3:>7.2f}"
              f"{r['step_s'] * 1e3:>8.1f}{r['simulated_step_s'] * 1e3:>7.1f}"
              f"  {str(r['peak_activations'])}")
    s = record.get("stage_vs_torch")
    if s:
        print(f"one stage forward + backward, {record['rows_per_micro_batch']} rows: LeZero "
              f"{s['lezero_s'] * 1e3:.2f} ms, PyTorch {s['torch_s'] * 1e3:.2f} ms, ratio "
              f"{s['ratio']:.2f} (one thread each)")


if __name__ == "__main__":
    from _mpi_bench import run
    from _record import run_main
    sys.exit(run_main(lambda: run(__file__, __doc__, measure, report, "bench_pipeline", [2])))
