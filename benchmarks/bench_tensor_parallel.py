"""Tensor parallelism: step time and communication volume per layer, on 2 and 4 ranks.

    python benchmarks/bench_tensor_parallel.py          # relaunches itself: -n 2, then -n 4
    python benchmarks/bench_tensor_parallel.py --ranks 2
    python benchmarks/bench_tensor_parallel.py --report FILE
    python benchmarks/bench_tensor_parallel.py --quick --record   # docs/parallel.md's block

One BLAS/Numba thread per rank (the machine has 2 cores: 4 ranks are oversubscribed, two
per core).  GPT-mini (2 blocks, width 256, 8 heads, vocabulary 256, 8 sequences of 64
tokens), in alternating rounds:

* tp=1: the whole model on rank 0, the others idle (the one-process step);
* "both": the whole model on every rank at once, no communication (what contention for
  the cores and memory alone does to a step: each step as long as the slowest rank's);
* tp=p: ``ParallelGPT`` over all p ranks, the same global batch;
* per layer, from ``CommAccounting``: collectives, count, bytes sent per rank, and their
  measured time (waiting for the slowest rank included);
* the cost model: compute of the "both" step divided by p, plus every all-reduce priced by
  the alpha-beta model of Parallel I (``_ddp_model``), fitted to an all-reduce sweep on
  the same p ranks;
* LeZero's one-process step beside PyTorch's (the same model, ``bench_gpt_mini``).

Results: benchmarks/results/bench_tensor_parallel_<p>.json; docs/parallel.md reads them.
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

from bench_ddp import timed  # noqa: E402  (rank 0's seconds per step)

VOCAB, BLOCK, LAYERS, HEADS, D_MODEL, BATCH = 256, 64, 2, 8, 256, 8


def config():
    from lezero.nn.models.gpt import GPTConfig
    return GPTConfig(vocab_size=VOCAB, block_size=BLOCK, n_layer=LAYERS, n_head=HEADS,
                     d_model=D_MODEL)


def batch():
    ids = np.random.default_rng(0).integers(0, VOCAB, (BATCH, BLOCK + 1))
    return ids[:, :-1], ids[:, 1:]


def make_step(model, opt, x, y):
    def step():
        opt.zero_grad()
        model.loss(x, y).backward()
        opt.step()
    return step


def concurrent_run(world, steps):
    """The whole model on every rank at once; the slowest rank's time per step."""
    import lezero as lz
    from lezero import optim, parallel
    mine = world.split(world.rank, name="mine")
    lz.manual_seed(0)
    model = parallel.ParallelGPT(config(), comm=mine)
    opt = optim.SGD(model.parameters(), lr=1e-3)
    step = make_step(model, opt, *batch())
    step()
    times = np.array(timed(world, step, steps, alone=False))
    return world.allgather(times).max(axis=0).tolist()


def tp_run(world, comm, steps, alone):
    import lezero as lz
    from lezero import optim, parallel
    lz.manual_seed(0)
    model = parallel.ParallelGPT(config(), comm=comm)
    opt = optim.SGD(model.parameters(), lr=1e-3)
    x, y = batch()
    step = make_step(model, opt, x, y)
    if comm is not None:
        step()                                         # warm-up
    times = timed(world, step if comm is not None else (lambda: None), steps, alone)
    if comm is None:
        return {"step_s": times}
    with parallel.CommAccounting(model) as acc:
        step()
    return {"step_s": times, "layers": acc.per_layer(), "totals": acc.totals()}


def allreduce_sweep(comm):
    out = []
    for k in range(2, 23, 2):                           # 4 B .. 4 MiB
        x = np.ones(2 ** k // 4, np.float32)
        best = float("inf")
        for _ in range(8):
            comm.barrier()
            t0 = time.perf_counter()
            comm.allreduce(x, out=x)
            best = min(best, time.perf_counter() - t0)
        out.append((2 ** k, best))
    return out


def torch_side_by_side(world, rounds=5):
    if world.rank != 0:
        return None
    import torch

    import lezero as lz
    from lezero.nn.models.gpt import GPT
    from _common import interleaved_best
    from bench_gpt_mini import torch_gpt
    torch.set_num_threads(1)
    x, y = batch()
    lz.manual_seed(0)
    ours = GPT(config())
    theirs = torch_gpt(VOCAB, BLOCK, LAYERS, HEADS, D_MODEL)
    xt, yt = torch.tensor(x), torch.tensor(y)

    def torch_step():
        out = theirs(xt)
        torch.nn.functional.cross_entropy(out.reshape(-1, VOCAB), yt.reshape(-1)).backward()

    def lezero_step():
        ours.loss(x, y).backward()

    best = interleaved_best([lezero_step, torch_step], rounds=rounds)
    return {"lezero_s": best[0], "torch_s": best[1], "ratio": best[0] / best[1]}


def measure(world, quick):
    steps, rounds = (3, 1) if quick else (5, 3)
    alone_comm = world.split(world.rank if world.rank == 0 else None, name="alone")
    got = {"tp1": [], "both": [], "tp": []}
    for _ in range(rounds):
        got["tp1"].append(tp_run(world, alone_comm, steps, alone=True)["step_s"])
        got["both"].append(concurrent_run(world, steps))
        got["tp"].append(tp_run(world, world, steps, alone=False))
    sweep = allreduce_sweep(world)
    return {"date": datetime.date.today().isoformat(), "ranks": world.size,
            "command": f"python benchmarks/bench_tensor_parallel.py --ranks {world.size}"
                       + (" --quick" if quick else ""),
            "model": {"vocab": VOCAB, "block": BLOCK, "layers": LAYERS, "heads": HEADS,
                      "d_model": D_MODEL, "batch": BATCH},
            "tp1_step_s": [t for r in got["tp1"] for t in r],
            "both_step_s": [t for r in got["both"] for t in r],
            "tp_step_s": [t for r in got["tp"] for t in r["step_s"]],
            "layers": got["tp"][-1]["layers"], "totals": got["tp"][-1]["totals"],
            "allreduce": sweep, "torch": torch_side_by_side(world)}


def analyse(record):
    from _ddp_model import allreduce_time, fit
    from lezero.parallel.wire import nbytes_text
    p = record["ranks"]
    t1 = float(np.median(record["tp1_step_s"]))
    both = float(np.median(record["both_step_s"]))
    tp = float(np.median(record["tp_step_s"]))
    alpha, beta = fit(*zip(*record["allreduce"]), p, large_min=2 ** 16)
    comm = sum(r["count"] * allreduce_time(r["payload_bytes"] / r["count"], p, alpha, beta)
               for r in record["layers"] if r["op"] == "allreduce")
    predicted = both / p + comm
    record.update(alpha_s=alpha, beta_s_per_byte=beta, predicted_step_s=predicted,
                  comm_model_s=comm)
    m = record["model"]
    print(f"== tensor parallelism on {p} ranks, {record['date']} (GPT-mini {m['layers']} x "
          f"{m['d_model']}, {m['heads']} heads, vocabulary {m['vocab']}, {m['batch']} x "
          f"{m['block']} tokens; one thread per rank, 2 shared cores)")
    print(f"step: tp=1 {t1 * 1e3:.1f} ms (median, range {min(record['tp1_step_s']) * 1e3:.0f}"
          f"-{max(record['tp1_step_s']) * 1e3:.0f}), tp={p} {tp * 1e3:.1f} ms (range "
          f"{min(record['tp_step_s']) * 1e3:.0f}-{max(record['tp_step_s']) * 1e3:.0f}); "
          f"speed-up {t1 / tp:.2f}; the whole model on every rank at once ('both') "
          f"{both * 1e3:.1f} ms")
    print(f"cost model: both / {p} + all-reduces (alpha {alpha * 1e6:.1f} us, 1/beta "
          f"{1 / beta / 1e9:.2f} GB/s) = {both / p * 1e3:.1f} + {comm * 1e3:.1f} = "
          f"{predicted * 1e3:.1f} ms (measured {tp * 1e3:.1f}; the rest is the ranks "
          "waiting for each other at each all-reduce)")
    print(f"{'layer':<30}{'phase':<9}{'op':<10}{'count':>6}{'payload':>10}{'sent':>10}"
          f"{'measured ms':>12}{'model ms':>9}")
    for r in record["layers"]:
        model_ms = (r["count"] * allreduce_time(r["payload_bytes"] / r["count"], p, alpha,
                                                beta) * 1e3 if r["op"] == "allreduce" else 0)
        print(f"{r['layer'][:29]:<30}{r['phase']:<9}{r['op']:<10}{r['count']:>6g}"
              f"{nbytes_text(int(r['payload_bytes'])):>10}"
              f"{nbytes_text(int(r['wire_bytes'])):>10}{r['seconds'] * 1e3:>12.2f}"
              f"{model_ms:>9.2f}")
    t = record["totals"]
    print(f"{'total':<45}{t['count']:>6g}{nbytes_text(int(t['payload_bytes'])):>10}"
          f"{nbytes_text(int(t['wire_bytes'])):>10}{t['seconds'] * 1e3:>12.2f}"
          f"{comm * 1e3:>9.2f}")
    s = record.get("torch")
    if s:
        print(f"one-process forward + backward: LeZero {s['lezero_s'] * 1e3:.1f} ms, PyTorch "
              f"{s['torch_s'] * 1e3:.1f} ms, ratio {s['ratio']:.2f}")
    return record


if __name__ == "__main__":
    from _mpi_bench import run
    from _record import run_main
    sys.exit(run_main(lambda: run(__file__, __doc__, measure, analyse,
                                  "bench_tensor_parallel", [2, 4])))
