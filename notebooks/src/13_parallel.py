# %% [markdown]
# # 13. Data parallelism over MPI
#
# This notebook follows `steps/step48.py` (the communicator) and `steps/step49.py`
# (`DataParallel`). Data parallelism runs one copy of the training script per process,
# all started together by `mpiexec -n N python train.py`; each rank trains on its shard of
# every batch and the gradients are averaged with an all-reduce. A notebook is a single
# process, so here we (1) look at the communicator in a one-process world, (2) launch the
# example `examples/train_ddp_cnn.py` on two ranks with `mpiexec` as a subprocess, and
# (3) draw the timeline it recorded: when each gradient bucket was ready and when its
# all-reduce ran, overlapped with the rest of backward. Finally (4) the measured cost
# model from `benchmarks/bench_ddp.py` and its projection to 128 nodes.

# %%
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import matplotlib.pyplot as plt
import lezero as lz
from lezero import parallel
# %matplotlib inline

ROOT = os.path.abspath("..") if os.path.basename(os.getcwd()) == "notebooks" else os.getcwd()

# %% [markdown]
# ## 1. The communicator, alone
# `parallel.init()` returns the world. Alone, it has one rank and every collective is a
# copy; under `mpiexec -n 4` the same calls sum over four processes.

# %%
world = parallel.init()
x = np.array([1.0, 2.0, 3.0])
print(world, "| allreduce:", world.allreduce(x), "| allgather:", world.allgather(x, axis=0))
v = lz.Variable(x)
parallel.all_reduce(v).backward(grad=np.ones(3))
print("gradient through a differentiable all-reduce:", v.grad.data)

# %% [markdown]
# ## 2. Two ranks, launched from here
# The script below is ordinary LeZero training code; `DataParallel` and
# `DistributedSampler` are the only additions, plus `SyncBatchNorm` so that batch
# statistics span both ranks. The loop is the usual one:

# %%
source = open(os.path.join(ROOT, "examples", "train_ddp_cnn.py")).read()
start = source.index("    def train_epoch(epoch):")
print(source[start:source.index("    start = time.perf_counter()")])

# %%
out = tempfile.mkdtemp()
mpiexec = os.path.join(os.path.dirname(sys.executable), "mpiexec")
env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", NUMBA_NUM_THREADS="1",
           PYTHONPATH=ROOT)
env = {k: v for k, v in env.items() if not k.startswith(("PMI_", "MPI_LOCAL"))}
cmd = [mpiexec, "-n", "2", sys.executable, os.path.join(ROOT, "examples", "train_ddp_cnn.py"),
       "--epochs", "1", "--bucket-mb", "0.01", "--out", out]
print("$", " ".join(["mpiexec", "-n", "2", "python", "examples/train_ddp_cnn.py", *cmd[5:-1],
                      "OUT"]))
run = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
print(run.stdout[-2500:] or run.stderr[-2500:])

# %% [markdown]
# ## 3. The timeline
# Every rank recorded, per synchronised step, its forward, its backward window (first to
# last gradient), each bucket's all-reduce, and the final wait. `to_chrome_trace` gathered
# both ranks' events into one Chrome-trace file (open it in `chrome://tracing` or
# ui.perfetto.dev); here we draw the last steps with matplotlib.

# %%
events = json.load(open(os.path.join(out, "timeline.json")))["traceEvents"]
spans = [e for e in events if e["ph"] == "X"]
last = max(e["args"].get("step", 0) for e in spans if e["name"] == "backward")
steps = {last - 1, last}
t0 = min(e["ts"] for e in spans if e["args"].get("step") in steps and e["name"] == "forward")
fig, ax = plt.subplots(figsize=(10, 2.8))
colors = {"forward": "#9ecae1", "backward": "#3182bd", "wait": "#de2d26"}
for e in spans:
    step = e["args"].get("step")
    rank, lane = e["pid"], (0 if e["tid"] == 0 else 1)
    y = rank * 3 + (1 - lane)
    if step in steps:
        ax.broken_barh([((e["ts"] - t0) / 1e3, e["dur"] / 1e3)], (y, 0.8),
                       color=colors[e["name"]])
    elif e["name"].startswith("all-reduce") and e["ts"] >= t0:
        ax.broken_barh([((e["ts"] - t0) / 1e3, max(e["dur"], 20) / 1e3)], (y, 0.8),
                       color="#31a354", alpha=0.7)
ax.set_yticks([0.4, 1.4, 3.4, 4.4])
ax.set_yticklabels(["rank 0 all-reduce", "rank 0 compute", "rank 1 all-reduce",
                    "rank 1 compute"])
ax.set_xlabel("ms")
ax.set_title("last two steps: forward, backward, all-reduce per bucket (green), final wait "
             "(red)")
plt.tight_layout()
plt.show()

# %% [markdown]
# ## 4. What it costs, and what it would cost on 128 nodes
# `benchmarks/bench_ddp.py` (run under `mpiexec -n 2`, one BLAS thread per rank) measures
# all-reduce times to fit the alpha-beta model `t = 2(p-1) alpha + 2(p-1)/p n beta`, the
# step times with and without bucketing, and projects a 1.5B-parameter GPT to 128 nodes
# under stated assumptions (docs/parallel.md). The recorded run:

# %%
rec = json.load(open(os.path.join(ROOT, "benchmarks", "results", "bench_ddp.json")))
print(f"recorded {rec['date']}: alpha {rec['alpha_s'] * 1e6:.1f} us, "
      f"1/beta {1 / rec['beta_s_per_byte'] / 1e9:.2f} GB/s (shared memory, this machine)")
resnet = rec["models"]["resnet18"]
sweep = {k: v for k, v in resnet.items() if k not in ("alone", "concurrent")}
mbs = list(sweep)
fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.2))
a.bar(mbs, [np.median(sweep[m]["step_s"]) * 1e3 for m in mbs], color="#3182bd")
a.axhline(np.median(resnet["alone"]["step_s"]) * 1e3, color="k", ls=":", label="1 rank alone")
both = resnet["concurrent"].get("slowest_step_s") or resnet["concurrent"]["step_s"]
a.axhline(np.median(both) * 1e3, color="gray", ls="--", label="2 ranks, no communication")
a.legend(fontsize=7, loc="lower right")
a.set_xlabel("bucket_mb (bars: overlap fraction)"), a.set_ylabel("step ms")
a.set_title("ResNet-18 on 2 ranks")
for i, m in enumerate(mbs):
    a.text(i, 5, f"{sweep[m]['overlap_fraction']:.0%}", ha="center", color="white")
for link in dict.fromkeys(r["link"] for r in rec["projection"]):
    rows = [r for r in rec["projection"] if r["link"] == link]
    b.plot([r["nodes"] for r in rows], [r["ideal"] for r in rows], "o-", label=link)
b.axhline(0.92, color="gray", ls="--", label="design card: 92%")
b.set_xscale("log", base=2), b.set_ylim(0, 1.05), b.set_xlabel("nodes")
b.set_title("projected efficiency, 1.5B GPT"), b.legend(fontsize=7)
plt.tight_layout()
plt.show()
