# %% [markdown]
# # 17. Serving: dynamic batching behind a KServe v2 server
#
# This notebook follows `steps/step60.py`. A model that answers one request at a time
# pays the full price of each call -- reading every weight, launching every operator --
# for a single sample. `lezero.serving.DynamicBatcher` merges the requests that arrive
# within a few milliseconds into one batch, and `lezero.serving.Server` puts it behind
# HTTP with the KServe v2 / Open Inference Protocol that Triton's and KServe's clients
# already speak. We measure why batching pays, watch the batcher decide, pad sequences
# of different lengths, and drive a server with a bounded load to plot throughput and
# latency with and without batching.

# %%
import concurrent.futures
import time

import numpy as np
import matplotlib.pyplot as plt
import lezero as lz
from lezero import nn, serving
from lezero.serving.loadgen import run_load
# %matplotlib inline

# One BLAS and one Numba thread: steadier on a shared machine.
import numba
from threadpoolctl import threadpool_limits
threadpool_limits(1)
numba.set_num_threads(1)
lz.manual_seed(16)

# %% [markdown]
# ## Why batching pays
# The time per sample of a wide MLP (784-2048-2048-10) at several batch sizes. At batch
# 1 each layer is a matrix-vector product that reads all 23 MB of weights to do two
# flops per weight; a batch of 32 reads them once for 32 samples.

# %%
mlp = nn.Sequential(nn.Linear(784, 2048), nn.ReLU(), nn.Linear(2048, 2048), nn.ReLU(),
                    nn.Linear(2048, 10)).eval()


def per_sample_ms(model, batch, repeat=5):
    x = np.random.default_rng(0).random((batch, 784), dtype=np.float32)
    with lz.no_grad():
        model(x)
        best = min(_timed(model, x) for _ in range(repeat))
    return best / batch * 1000


def _timed(model, x):
    t0 = time.perf_counter()
    model(x)
    return time.perf_counter() - t0


sizes = [1, 2, 4, 8, 16, 32, 64]
cost = [per_sample_ms(mlp, b) for b in sizes]
for b, c in zip(sizes, cost):
    print(f"batch {b:3d}: {c:.3f} ms per sample")

# %% [markdown]
# Batches of 2 to 8 can cost *more* per sample than batch 1 here: NumPy's OpenBLAS runs
# one row as a fast matrix-vector product, but handles a handful of rows with a general
# matrix kernel that is slow at that shape (about 3-7x the time of one row for two rows
# on this machine). From 16-32 rows on, batching wins clearly. So a batcher should fill
# its batches -- which is what `max_delay_ms` and `preferred_batch_sizes` are for.

# %% [markdown]
# ## The batcher at work
# Sixteen threads submit 64 single samples. Each `BatchRecord` says how many samples a
# batch held and why it was sent: `full` (max_batch_size reached), `preferred` (a
# preferred size reached), `delay` (the oldest request waited max_delay_ms) or
# `shutdown` (drained by `close`). Every caller gets exactly its own row.

# %%
x = np.random.default_rng(1).random((64, 784), dtype=np.float32)
with serving.DynamicBatcher(mlp, max_batch_size=16, max_delay_ms=5,
                            preferred_batch_sizes=[8]) as batcher:
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        rows = list(pool.map(lambda v: batcher.submit(v).result(), x))
with lz.no_grad():
    print("rows equal the batch forward:", np.allclose(np.stack(rows), mlp(x).data, atol=1e-5))
print([(r.size, r.reason) for r in batcher.records])
print({k: v for k, v in batcher.stats().items() if k in ("submitted", "completed", "batches")})

# %% [markdown]
# ## Sequences of different lengths
# Padding makes sequences stackable; the model receives a mask, and each answer is cut
# back to its request's length. One queue pads every batch to its longest member; length
# buckets keep short sequences with short ones. Here: 200 sequences of lognormal length
# (4 to 128 steps) through an LSTM tagger, with and without buckets.

# %%
class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(8, 32, batch_first=True)
        self.head = nn.Linear(32, 4)

    def forward(self, x, mask):      # the LSTM is causal: padding after a sequence is inert
        return self.head(self.lstm(x)[0])


tagger = Tagger().eval()
rng = np.random.default_rng(2)
seqs = [rng.standard_normal((n, 8)).astype(np.float32)
        for n in np.clip(rng.lognormal(2.8, 0.9, 200).astype(int), 4, 128)]
bucket_runs = {}
for label, buckets in (("one queue", None), ("buckets", [8, 16, 32, 64, 128])):
    with serving.DynamicBatcher(tagger, max_batch_size=32, max_delay_ms=20,
                                padding=serving.Padding(axis=0, buckets=buckets)) as b:
        t0 = time.perf_counter()
        futures = [b.submit(s) for s in seqs]
        outs = [f.result() for f in futures]
        seconds = time.perf_counter() - t0
    assert all(o.shape == (len(s), 4) for o, s in zip(outs, seqs))
    stats = b.stats()
    bucket_runs[label] = (stats["padding_waste"], len(seqs) / seconds)
    print(f"{label:9s}: {stats['batches']:3d} batches, padding waste "
          f"{stats['padding_waste']:.0%}, {len(seqs) / seconds:.0f} sequences/s")

# %% [markdown]
# ## A server under load
# The MLP served twice, batched (`max_batch_size=32, max_delay_ms=2`) and unbatched
# (`max_batch_size=1`), on 127.0.0.1. `run_load` keeps C connections busy, each sending
# a request and waiting for its answer, for at most 250 requests or 2 seconds per point,
# and counts every answer by its id. Client and server share this process (and its
# GIL) here, so the numbers are lower than `benchmarks/bench_serving.py`'s, which runs
# the server in its own process; the shape of the curves is the point.

# %%
served = {"batched": serving.ServedModel(mlp, max_batch_size=32, max_delay_ms=2),
          "unbatched": serving.ServedModel(mlp, max_batch_size=1, max_delay_ms=0)}
samples = [{"input__0": v[None]} for v in x[:16]]
concurrency = [1, 4, 16, 48]
results = {name: [] for name in served}
with serving.Server(served, port=0) as server:
    for c in concurrency:
        for name in ("unbatched", "batched"):
            r = run_load(server.url, name, samples, concurrency=c, requests=250,
                         time_limit=2.0)
            assert r.ok == r.sent and r.lost == r.duplicates == r.wrong == 0
            results[name].append(r)
            print(f"C={c:3d} {name:9s} {r.throughput:7.1f} req/s  p50 {r.percentile(50):7.1f}"
                  f" ms  p95 {r.percentile(95):7.1f} ms")

# %%
fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
axes[0].plot(sizes, cost, "o-")
axes[0].set(xscale="log", xlabel="batch size", ylabel="ms per sample",
            title="MLP cost per sample")
for name, rs in results.items():
    axes[1].plot(concurrency, [r.throughput for r in rs], "o-", label=name)
    axes[2].plot(concurrency, [r.percentile(95) for r in rs], "o-", label=name)
axes[1].set(xscale="log", xlabel="concurrent clients", ylabel="requests / s",
            title="throughput")
axes[2].set(xscale="log", yscale="log", xlabel="concurrent clients", ylabel="p95 ms",
            title="p95 latency")
axes[1].legend()
fig.tight_layout()
plt.show()

# %% [markdown]
# At one client, batching can only add its delay (the request waits up to 2 ms for
# company that never comes). With many clients, the unbatched server queues them one by
# one while the batched one serves a whole batch in about the time of a few single
# calls: throughput rises, and latency falls with it. `benchmarks/bench_serving.py`
# measures this with the server in its own process, for an MLP, a CNN and the LSTM with
# and without buckets, and docs/serving.md records its figures.
