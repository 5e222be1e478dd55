"""Serving over loopback: throughput and latency with and without dynamic batching.

    python benchmarks/bench_serving.py              # a few minutes
    python benchmarks/bench_serving.py --quick      # under a minute
    python benchmarks/bench_serving.py --record     # also docs/serving.md's figures block

A server process (this script with ``--serve``) hosts each model twice -- batched
(``max_batch_size=32, max_delay_ms=2``) and unbatched (``max_batch_size=1``) -- and the
same module object behind both, so their answers must agree.  This process drives them
with ``lezero.serving.loadgen.run_load``: C connections in a closed loop, each request
with binary tensors and a unique id, bounded by a request count and a time cap per
point.  Batched and unbatched runs alternate at each concurrency, so both meet the same
machine load.  Reported per point: requests/s, p50/p95/p99 latency, and the ratios
batched/unbatched (target, issue 16: >= 3x throughput at <= 1.1x p95 where batching
helps).  The variable-length part serves a Transformer-encoder classifier on sequences
of 4..128 steps, padded to the longest in each batch vs. grouped in length buckets:
padding waste (from the server's metrics) and throughput.  Every request is accounted for: sent = ok,
no loss, no duplicate, no answer with another request's id or a wrong value.

PyTorch has no in-process server to compare with, so there is no torch column.
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
from _record import run_main  # noqa: E402

CONCURRENCY = (1, 4, 16, 64)
SEQ_LENGTHS = (4, 128)
BUCKETS = [8, 16, 32, 64, 128]
WIDTH = int(os.environ.get("BENCH_MLP_WIDTH", 4096))   # hidden width of the MLP


# ----- the models (built identically in the server process) --------------------------
def build_models():
    import lezero as lz
    from lezero import nn

    class SequenceClassifier(nn.Module):
        """A 2-layer Transformer encoder over a (T, 64) sequence, mean-pooled over the
        real positions (the mask), then a linear head: padding cannot change it."""

        def __init__(self):
            super().__init__()
            layer = nn.TransformerEncoderLayer(64, 4, 256, dropout=0.0, batch_first=True)
            self.encoder = nn.TransformerEncoder(layer, 2)
            self.head = nn.Linear(64, 10)

        def forward(self, x, mask):
            h = self.encoder(x, src_key_padding_mask=~mask)
            weights = mask[:, :, None].astype(np.float32)
            return self.head((h * weights).sum(axis=1) / weights.sum(axis=1))

    lz.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(784, WIDTH), nn.ReLU(), nn.Linear(WIDTH, WIDTH), nn.ReLU(),
                        nn.Linear(WIDTH, 10))
    cnn = nn.Sequential(                    # a small CNN for 28x28 grey images
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 3 * 3, 256), nn.ReLU(), nn.Linear(256, 10))
    return {"mlp": (mlp, [784]), "cnn": (cnn, [1, 28, 28]),
            "seq": (SequenceClassifier(), [-1, 64])}


def serve(threads):
    """The server process: print the URL, serve until stdin closes."""
    from threadpoolctl import threadpool_limits
    import numba
    from lezero.serving import Padding, ServedModel, Server
    threadpool_limits(threads)
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    served = {}
    for name, (model, shape) in build_models().items():
        spec = [("input__0", "FP32", shape)]
        if name == "seq":
            for mode, buckets in (("pad", None), ("bucket", BUCKETS)):
                served[f"seq_{mode}"] = ServedModel(
                    model, spec, max_batch_size=32, max_delay_ms=2,
                    padding=Padding(axis=0, buckets=buckets, unpad_axis=None))
            continue
        served[f"{name}_b"] = ServedModel(model, spec, max_batch_size=32, max_delay_ms=2)
        served[f"{name}_nb"] = ServedModel(model, spec, max_batch_size=1, max_delay_ms=0)
    with Server(served, port=0, max_queue_size=4096) as server:
        print(server.url, flush=True)
        sys.stdin.read()                    # the parent closes stdin to stop us


# ----- the load side -----------------------------------------------------------------
def samples_for(name, n=32, seed=0):
    rng = np.random.default_rng(seed)
    if name == "seq":
        lengths = np.clip(rng.lognormal(2.8, 0.9, n).astype(int), *SEQ_LENGTHS)
        return [{"input__0": rng.standard_normal((1, t, 64)).astype(np.float32)}
                for t in lengths]
    shape = {"mlp": (1, 784), "cnn": (1, 1, 28, 28)}[name]
    return [{"input__0": rng.random(shape, dtype=np.float32)} for _ in range(n)]


class Checker:
    """Every answer for sample k must equal the first answer seen for k (whichever
    server mode gave it): a swapped or corrupted answer shows up as ``wrong``."""

    def __init__(self, n):
        self.first, self.n = {}, n

    def __call__(self, index, outputs):
        y = outputs["output__0"]
        ref = self.first.setdefault(index % self.n, y)
        return np.allclose(y, ref, rtol=1e-3, atol=1e-4)


def server_cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def metric(url, name, labels):
    import urllib.request
    text = urllib.request.urlopen(url + "/metrics", timeout=10).read().decode()
    key = f"{name}{{{labels}}}"
    for line in text.splitlines():
        if line.startswith(key + " "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def drive(url, model, samples, check, concurrency, requests, time_limit, pid, totals):
    from lezero.serving.loadgen import run_load
    cpu0 = server_cpu_seconds(pid)
    r = run_load(url, model, samples, concurrency=concurrency, requests=requests,
                 time_limit=time_limit, check=check)
    cpu = server_cpu_seconds(pid) - cpu0
    for key in ("sent", "ok", "lost", "duplicates", "wrong"):
        totals[key] = totals.get(key, 0) + getattr(r, key)
    totals["errors"] = totals.get("errors", 0) + sum(r.errors.values())
    return r, cpu / max(r.ok, 1) * 1000


def batching_table(url, pid, name, args, totals, rows):
    print(f"\n== {name}: dynamic batching (max_batch_size 32, max_delay 2 ms) vs none")
    print(f"{'C':>4} {'mode':>9} {'req/s':>8} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8}"
          f" {'srv cpu ms/req':>15}")
    samples, check = samples_for(name), Checker(32)
    for c in args.concurrency:
        res = {}
        for mode in ("nb", "b") * args.rounds:
            r, cpu = drive(url, f"{name}_{mode}", samples, check, c, args.requests,
                           args.time_limit, pid, totals)
            res.setdefault(mode, []).append((r, cpu))
        for mode in ("nb", "b"):
            r, cpu = max(res[mode], key=lambda rc: rc[0].throughput)   # the best round
            label = "batched" if mode == "b" else "unbatched"
            print(f"{c:>4} {label:>9} {r.throughput:>8.1f} {r.percentile(50):>8.2f} "
                  f"{r.percentile(95):>8.2f} {r.percentile(99):>8.2f} {cpu:>15.2f}")
        b, nb = max(res["b"], key=lambda rc: rc[0].throughput)[0], \
            max(res["nb"], key=lambda rc: rc[0].throughput)[0]
        ratio, p95 = b.throughput / nb.throughput, b.percentile(95) / nb.percentile(95)
        hit = "ok" if ratio >= 3 and p95 <= 1.1 else "miss"
        print(f"{c:>4} {'ratio':>9} {ratio:>7.2f}x {'':>8} {p95:>7.2f}x   "
              f"(target >= 3x at <= 1.1x p95: {hit})")
        rows.append({"model": name, "concurrency": c, "throughput_ratio": round(ratio, 2),
                     "p95_ratio": round(p95, 2), "batched_rps": round(b.throughput, 1),
                     "unbatched_rps": round(nb.throughput, 1)})


def bucketing_table(url, pid, args, totals, rows):
    print(f"\n== Transformer encoder classifier, sequences of {SEQ_LENGTHS[0]}.."
          f"{SEQ_LENGTHS[1]} steps (lognormal), C={args.seq_concurrency}: pad to the "
          f"batch's longest vs length buckets {BUCKETS}")
    print(f"{'mode':>8} {'req/s':>8} {'p50 ms':>8} {'p95 ms':>8} {'padding waste':>14}"
          f" {'mean batch':>11} {'srv cpu ms/req':>15}")
    samples, check = samples_for("seq", n=64), Checker(64)
    results = {}
    for mode in ("pad", "bucket") * args.rounds:
        model = f"seq_{mode}"
        real0 = metric(url, "lezero_padding_positions_total", f'model="{model}",kind="real"')
        pad0 = metric(url, "lezero_padding_positions_total", f'model="{model}",kind="padded"')
        n0 = metric(url, "lezero_batch_size_count", f'model="{model}"')
        r, cpu = drive(url, model, samples, check, args.seq_concurrency, args.requests,
                       args.time_limit, pid, totals)
        real = metric(url, "lezero_padding_positions_total",
                      f'model="{model}",kind="real"') - real0
        padded = metric(url, "lezero_padding_positions_total",
                        f'model="{model}",kind="padded"') - pad0
        batches = metric(url, "lezero_batch_size_count", f'model="{model}"') - n0
        results.setdefault(mode, []).append((r, 1 - real / padded, r.ok / batches, cpu))
    for mode in ("pad", "bucket"):
        r, waste, mean_batch, cpu = max(results[mode], key=lambda x: x[0].throughput)
        print(f"{mode:>8} {r.throughput:>8.1f} {r.percentile(50):>8.2f} "
              f"{r.percentile(95):>8.2f} {waste:>13.1%} {mean_batch:>11.1f} {cpu:>15.2f}")
    ratio = max(x[0].throughput for x in results["bucket"]) / \
        max(x[0].throughput for x in results["pad"])
    print(f"   bucketing / padding to the longest: {ratio:.2f}x throughput")
    rows.append({"model": "seq", "bucket_over_pad": round(ratio, 2)})


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--quick", action="store_true", help="fewer points, shorter caps")
    p.add_argument("--threads", type=int, default=1, help="BLAS threads of the server")
    p.add_argument("--requests", type=int, default=1500, help="requests per point (cap)")
    p.add_argument("--time-limit", type=float, default=6.0, help="seconds per point (cap)")
    p.add_argument("--rounds", type=int, default=1, help="alternating rounds per point")
    p.add_argument("--models", nargs="+", default=["mlp", "cnn", "seq"])
    p.add_argument("--concurrency", type=int, nargs="+", default=list(CONCURRENCY))
    p.add_argument("--seq-concurrency", type=int, default=64)
    p.add_argument("--json", help="also write the ratios to this file")
    args = p.parse_args()
    if args.serve:
        return serve(args.threads)
    if args.quick:
        args.concurrency, args.requests, args.time_limit = [1, 32], 400, 3.0
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS=str(args.threads))
    child = subprocess.Popen([sys.executable, __file__, "--serve", "--threads",
                              str(args.threads)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, env=env)
    try:
        url = child.stdout.readline().strip()
        if not url.startswith("http://127.0.0.1:"):
            raise SystemExit(f"the server did not start (got {url!r})")
        print(f"server at {url} (pid {child.pid}, {args.threads} BLAS thread(s)); "
              f"machine load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        totals, rows, t0 = {}, [], time.perf_counter()
        for name in args.models:
            if name == "seq":
                bucketing_table(url, child.pid, args, totals, rows)
            else:
                batching_table(url, child.pid, name, args, totals, rows)
        print(f"\nall requests: sent {totals['sent']}, ok {totals['ok']}, errors "
              f"{totals['errors']}, lost {totals['lost']}, duplicated "
              f"{totals['duplicates']}, wrong answers {totals['wrong']} "
              f"({time.perf_counter() - t0:.0f} s)")
        if args.json:
            from lezero.utils.files import atomic_write
            atomic_write(args.json, json.dumps({"rows": rows, "totals": totals}, indent=1))
        if totals["sent"] != totals["ok"] or totals["duplicates"] or totals["wrong"]:
            raise SystemExit("some requests were lost, failed, duplicated or wrong")
    finally:
        child.stdin.close()
        child.wait(30)


if __name__ == "__main__":
    run_main(main)
