"""Data parallelism on 2 ranks: overlap, bucketing, scaling, and a fitted cost model.

    python benchmarks/bench_ddp.py            # relaunches itself as mpiexec -n 2
    mpiexec -n 2 python benchmarks/bench_ddp.py [--quick] [--out FILE]
    python benchmarks/bench_ddp.py --quick --record   # docs/parallel.md's block

One BLAS/Numba thread per rank (the machine has 2 cores).  Measured, in alternating
rounds so that every configuration meets the same (shared, drifting) machine load:

1. all-reduce time against message size -> alpha (latency) and beta (inverse bandwidth);
2. for an MLP, ResNet-18 (16x16 input) and GPT-mini: the step time of one rank alone
   (the plain model, rank 1 idle) and of DataParallel on 2 ranks with the same per-rank
   batch (weak scaling: efficiency = T1 / T2), with buckets (25 MiB, and 1 MiB) and with
   one all-reduce after backward (``bucket_mb=inf``), the overlap fraction from the
   timeline, and the step time the cost model (``_ddp_model.py``) predicts;
3. a bucket-size sweep on ResNet-18.

Results go to benchmarks/results/bench_ddp.json; with ``--record`` the printed report
is also docs/parallel.md's ``bench_ddp`` figures block (``_record.py``).
"""
import argparse
import datetime
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402

from _ddp_model import (allreduce_time, buckets, efficiency, fit, project,  # noqa: E402
                        schedule, step_time)

# The projection's stated assumptions (docs/parallel.md discusses them).
GPT_PARAMS = 1.5e9                 # a GPT-2-XL-size model
GRAD_BYTES = 2                     # fp16 gradients (AMP)
BUCKET_MB = 100.0                  # buckets for 128 nodes: larger than PyTorch's 25 MiB,
                                   # since each ring all-reduce pays 2 (p-1) latencies
NODE_TOKENS = 8 * 8 * 1024         # per node and step: 8 GPUs x 8 sequences x 1024 tokens
NODE_FLOPS = 8 * 312e12 * 0.40     # 8 A100s at 40% of their 312 TFLOP/s (bf16/fp16)
LINKS = {"100 Gb/s per node (one NIC)": 12.5e9 * 0.8,
         "8 x 200 Gb/s per node (DGX A100)": 200e9 * 0.8}   # 80% of line rate achieved
LINK_ALPHA = 5e-6                  # seconds per message on InfiniBand


def median(xs):
    return float(np.median(xs)) if len(xs) else float("nan")


# ----- 1. all-reduce alone ------------------------------------------------------------

def allreduce_sweep(world, quick):
    sizes = [2 ** k for k in range(2, 27, 2 if quick else 1)]         # 4 B .. 64 MiB
    out = []
    for n in sizes:
        x = np.ones(n // 4, np.float32)
        reps = 30 if n < 2 ** 16 else (8 if n < 2 ** 23 else 4)
        times = []
        for _ in range(reps + 2):
            world.barrier()
            t0 = time.perf_counter()
            world.allreduce(x, out=x)
            times.append(time.perf_counter() - t0)
        out.append((n, min(times[2:])))     # the best: a loaded machine adds only delays
    return out


# ----- 2. models and steps -------------------------------------------------------------

def build(name):
    import lezero as lz
    from lezero import nn
    from lezero.nn import models
    lz.manual_seed(0)
    rng = np.random.default_rng(0)
    if name == "mlp":
        model = nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024),
                              nn.ReLU(), nn.Linear(1024, 10))
        batch = (rng.standard_normal((64, 784)).astype(np.float32), rng.integers(0, 10, 64))
    elif name == "resnet18":
        model = models.resnet18(num_classes=10, small_input=True)
        batch = (rng.standard_normal((4, 3, 16, 16)).astype(np.float32),
                 rng.integers(0, 10, 4))
    else:
        model = models.GPT()                                 # GPT-mini: 2 x 128, vocab 256
        ids = rng.integers(0, 256, (8, 65))
        batch = (ids[:, :-1], ids[:, 1:])
    return model, batch


def make_step(model, batch, opt):
    import lezero.functions as F

    def step():
        out = model(batch[0])
        loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), batch[1].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return step


def phases(model, batch, opt):
    """Seconds of forward, backward and the optimizer step, one rank alone."""
    import lezero.functions as F
    t0 = time.perf_counter()
    out = model(batch[0])
    loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), batch[1].reshape(-1))
    t1 = time.perf_counter()
    opt.zero_grad()
    loss.backward()
    t2 = time.perf_counter()
    opt.step()
    return t1 - t0, t2 - t1, time.perf_counter() - t2


def timed(world, step, steps, alone=False):
    """Rank 0's seconds per step (rank 1 idles at a barrier when ``alone``)."""
    times = []
    for _ in range(steps):
        world.barrier()
        if alone and world.rank != 0:
            continue
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    world.barrier()
    return times


def run_config(world, name, bucket_mb, steps):
    """DataParallel on all ranks: step times, timeline averages, bucket schedule."""
    from lezero import optim, parallel
    model, batch = build(name)
    dp = parallel.DataParallel(model, world, bucket_mb=bucket_mb)
    opt = optim.SGD(dp.parameters(), lr=1e-3, momentum=0.9)
    step = make_step(dp, batch, opt)
    for _ in range(2):
        step()
    dp.timeline().steps.clear()
    times = timed(world, step, steps)
    tl = dp.timeline()
    ready = [median([s["buckets"][i]["ready"] - s["first_grad"] for s in tl.steps])
             for i in range(len(dp.buckets))]
    dp.remove_hooks()
    return {"step_s": times, "buckets": [b["bytes"] for b in dp.buckets], "ready_s": ready,
            **tl.averages()}


def run_plain(world, name, steps, concurrent):
    """The plain model without communication: rank 0 alone (rank 1 idles), or every rank
    at once (``concurrent``: the compute of a 2-rank step, contention included)."""
    from lezero import optim
    model, batch = build(name)
    opt = optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    step = make_step(model, batch, opt)
    works = concurrent or world.rank == 0
    if works:
        for _ in range(2):
            step()
    split = [phases(model, batch, opt) for _ in range(3)] if works else []
    world.barrier()
    times = timed(world, step, steps, alone=not concurrent)
    fwd, bwd, upd = (median([s[i] for s in split]) for i in range(3)) if split else (0, 0, 0)
    out = {"step_s": times, "forward_s": fwd, "backward_s": bwd, "optimizer_s": upd,
           "params": int(model.num_parameters())}
    if concurrent:     # a synchronised step waits for the slower rank: keep the max
        everyone = world.allgather(np.array(times))
        out["slowest_step_s"] = everyone.max(axis=0).tolist()
    return out


def merge(runs):
    """Rounds of the same configuration: concatenate the step times, median the rest."""
    out = dict(runs[0])
    for key in ("step_s", "slowest_step_s"):
        if key in out:
            out[key] = [t for r in runs for t in r[key]]
    for key in runs[0]:
        if key not in ("step_s", "slowest_step_s") and isinstance(runs[0][key], float):
            out[key] = median([r[key] for r in runs])
    return out


# ----- 3. the report -------------------------------------------------------------------

def predict(compute, dp, ranks, alpha, beta, sweep):
    """Cost-model step times for a measured configuration from the compute of a 2-rank
    step (``compute``: the plain model on every rank at once): ideal overlap and none with
    the fitted alpha-beta all-reduce; the same schedule with each bucket's all-reduce
    interpolated from the measured sweep instead (this machine's caches included); and
    the compute plus the non-overlapped share of communication the timeline measured."""
    # Both ranks computing, each step as long as the slower rank's (the all-reduce waits
    # for it); the forward/backward/optimizer split is rank 0's, scaled to that.
    scale = 1.0
    if compute.get("slowest_step_s"):
        scale = median(compute["slowest_step_s"]) / median(compute["step_s"])
    f, b, o = (compute[k] * scale for k in ("forward_s", "backward_s", "optimizer_s"))
    # The timeline gives the shape of gradient production (when each bucket was ready),
    # the compute run its duration: hooks and contention stretch a DP run's backward.
    last = max(dp["ready_s"]) or 1.0
    ready = [r / last * b for r in dp["ready_s"]]
    nbytes = dp["buckets"]
    ideal = step_time(f, b, o, ready, nbytes, ranks, alpha, beta, True)
    none = step_time(f, b, o, ready, nbytes, ranks, alpha, beta, False)
    sizes, times = np.log([n for n, _ in sweep]), np.log([t for _, t in sweep])
    measured = [float(np.exp(np.interp(np.log(n), sizes, times))) for n in nbytes]
    ideal_m = schedule(f, b, o, ready, measured, True)
    none_m = schedule(f, b, o, ready, measured, False)
    comm = sum(allreduce_time(n, ranks, alpha, beta) for n in nbytes)
    with_overlap = f + b + o + sum(measured) * (1 - dp["overlap_fraction"])
    return {"ideal_s": ideal, "no_overlap_s": none, "ideal_measured_allreduce_s": ideal_m,
            "no_overlap_measured_allreduce_s": none_m, "with_measured_overlap_s": with_overlap,
            "comm_model_s": comm, "comm_measured_s": sum(measured)}


def rounds(world, name, configs, rounds_n, steps):
    """Alternate: alone, concurrent, then each bucket size, ``rounds_n`` times; merged."""
    got = {"alone": [], "concurrent": []}
    got.update({mb: [] for mb in configs})
    for _ in range(rounds_n):
        got["alone"].append(run_plain(world, name, steps, concurrent=False))
        got["concurrent"].append(run_plain(world, name, steps, concurrent=True))
        for mb in configs:
            got[mb].append(run_config(world, name, mb, steps))
    return {key: merge(runs) for key, runs in got.items()}


def print_models(results, alpha, beta):
    """The weak-scaling table: measured step times beside the cost model's."""
    print("\n== weak scaling on 2 ranks (same per-rank batch); times are medians, ms.")
    print("1 rank: the plain model alone; both: the plain model on both ranks at once (no "
          "communication), the slower rank's step; eff = 1 rank / 2 ranks; model: the step from 'both' and the "
          "bucket schedule, with the alpha-beta all-reduce (a-b) or the measured one (meas), "
          "ideal overlap / none")
    print(f"{'model':<9}{'params':>11}{'1 rank':>8}{'both':>7}{'bucket':>7}{'2 ranks':>8}"
          f"{'eff':>6}{'overlap':>8}{'exposed':>8}{'a-b ideal':>10}{'none':>7}"
          f"{'meas ideal':>11}{'none':>7}")
    for name, res in results.items():
        t1 = median(res["alone"]["step_s"])
        tc = median(res["concurrent"].get("slowest_step_s") or res["concurrent"]["step_s"])
        for mb, dp in res.items():
            if mb in ("alone", "concurrent"):
                continue
            t2 = median(dp["step_s"])
            p = dp["predicted"]
            print(f"{name:<9}{res['alone']['params']:>11,}{t1 * 1e3:>8.1f}{tc * 1e3:>7.1f}"
                  f"{mb:>7}{t2 * 1e3:>8.1f}{t1 / t2:>6.2f}{dp['overlap_fraction']:>8.0%}"
                  f"{dp['exposed_s'] * 1e3:>8.1f}{p['ideal_s'] * 1e3:>10.1f}"
                  f"{p['no_overlap_s'] * 1e3:>7.1f}{p['ideal_measured_allreduce_s'] * 1e3:>11.1f}"
                  f"{p['no_overlap_measured_allreduce_s'] * 1e3:>7.1f}")


def projection(overlap_fraction):
    """Efficiency at 1..128 nodes for the GPT-size model under each link assumption."""
    compute = 6 * GPT_PARAMS * NODE_TOKENS / NODE_FLOPS          # forward + backward
    rows = []
    for link, bandwidth in LINKS.items():
        for nodes in (2, 8, 32, 128):
            ideal, _ = project(GPT_PARAMS, GRAD_BYTES, compute, 2 / 3, nodes, LINK_ALPHA,
                               1 / bandwidth, BUCKET_MB)
            none, _ = project(GPT_PARAMS, GRAD_BYTES, compute, 2 / 3, nodes, LINK_ALPHA,
                              1 / bandwidth, BUCKET_MB, overlap=False)
            comm = sum(allreduce_time(n, nodes, LINK_ALPHA, 1 / bandwidth)
                       for n in buckets(GPT_PARAMS * GRAD_BYTES, BUCKET_MB))
            measured = efficiency(compute, comm, overlap_fraction, 2 / 3 * compute)
            rows.append({"link": link, "nodes": nodes, "compute_s": compute, "comm_s": comm,
                         "ideal": ideal, "no_overlap": none, "measured_overlap": measured})
    return rows


def print_projection(rows, overlap_fraction):
    print(f"\n== projection: {GPT_PARAMS / 1e9:.1f}B parameters, fp16 gradients in "
          f"{BUCKET_MB:g} MiB buckets, "
          f"{NODE_TOKENS} tokens per node per step at {NODE_FLOPS / 1e12:.0f} TFLOP/s per "
          f"node (compute {rows[0]['compute_s'] * 1e3:.0f} ms), alpha {LINK_ALPHA * 1e6:g} us")
    print(f"{'link':<34}{'nodes':>6}{'all-reduce ms':>14}{'ideal overlap':>14}"
          f"{'no overlap':>11}{f'{overlap_fraction:.0%} overlap':>13}")
    for r in rows:
        print(f"{r['link']:<34}{r['nodes']:>6}{r['comm_s'] * 1e3:>14.0f}{r['ideal']:>14.0%}"
              f"{r['no_overlap']:>11.0%}{r['measured_overlap']:>13.0%}")
    print("(the design card claims 92% data-parallel efficiency at 128 nodes)")


def measure(world, quick):
    """Every measurement, as a JSON-able record (rank 0's times)."""
    rounds_n, steps = (1, 3) if quick else (3, 5)
    sweep = allreduce_sweep(world, quick)
    models = {}
    for name in ("mlp", "resnet18", "gpt_mini"):
        configs = [25.0, 1.0, float("inf")]
        if name == "resnet18":
            configs = [0.25, 1.0, 4.0, 16.0, 25.0, float("inf")]
        res = rounds(world, name, configs, rounds_n, steps)
        models[name] = {str(k): v for k, v in res.items()}
    return {"date": datetime.date.today().isoformat(), "ranks": world.size,
            "command": "python benchmarks/bench_ddp.py" + (" --quick" if quick else ""),
            "allreduce": sweep, "models": models}


def analyse(record):
    """Fit the all-reduce, predict every configuration, project; print it all."""
    ranks, sweep = record["ranks"], record["allreduce"]
    alpha, beta = fit([n for n, _ in sweep], [t for _, t in sweep], ranks)
    record.update(alpha_s=alpha, beta_s_per_byte=beta)
    print(f"== all-reduce on {ranks} ranks (MPICH over shared memory, this machine), "
          f"{record['date']}")
    print(f"t = 2(p-1) alpha + 2(p-1)/p n beta: alpha = {alpha * 1e6:.1f} us (messages <= "
          f"64 B), beta = {beta * 1e9:.3f} ns/B = {1 / beta / 1e9:.2f} GB/s (least squares "
          "on messages >= 256 KiB); best of the repetitions")
    print(f"{'bytes':>10}{'measured us':>13}{'model us':>10}{'model/measured':>16}")
    for n, t in sweep:
        m = allreduce_time(n, ranks, alpha, beta)
        print(f"{n:>10}{t * 1e6:>13.1f}{m * 1e6:>10.1f}{m / t:>16.2f}")
    for res in record["models"].values():
        for key, dp in res.items():
            if key not in ("alone", "concurrent"):
                dp["predicted"] = predict(res["concurrent"], dp, ranks, alpha, beta, sweep)
    print_models(record["models"], alpha, beta)
    overlap = record["models"]["resnet18"]["1.0"]["overlap_fraction"]
    record["projection"] = projection(overlap)
    record["projection_overlap_from"] = "resnet18, 1 MiB buckets"
    print_projection(record["projection"], overlap)
    return record


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer sizes, rounds and steps")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "bench_ddp.json"))
    ap.add_argument("--report", metavar="FILE",
                    help="only re-analyse and print a recorded run (no MPI needed)")
    args = ap.parse_args()
    if args.report:
        with open(args.report) as f:
            analyse(json.load(f))
        return
    from lezero import parallel
    world = parallel.init(timeout=300)
    record = measure(world, args.quick)
    if world.rank != 0:
        return
    record = analyse(record)
    from lezero.utils.files import atomic_write
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    atomic_write(args.out, json.dumps(record, indent=1))
    print(f"\nwrote {os.path.relpath(args.out, ROOT)} (the machine is shared: rerun at a "
          "quiet time for firm numbers)")


def entry():
    """Started plainly: relaunch as ``mpiexec -n 2`` (one thread per rank); else run."""
    from lezero.parallel._mpi import launched_size
    if launched_size() == 1 and "--report" not in sys.argv:
        from _mpi_bench import relaunch
        return relaunch(__file__, 2)
    return main()


if __name__ == "__main__":
    from _record import run_main
    sys.exit(run_main(entry))
