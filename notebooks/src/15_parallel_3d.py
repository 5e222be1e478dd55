# %% [markdown]
# # 15. Tensor, pipeline and 3D parallelism
#
# This notebook follows `steps/step54.py` (tensor parallelism), `steps/step55.py`
# (pipeline schedules as data) and `steps/step56.py` (the process grid). A notebook is one
# process, so (1) the tensor-parallel layers run in a one-process world, (2) a pipeline
# schedule is built, simulated, checked and drawn -- no processes needed, it is data --,
# (3) the pipeline and 3D examples are launched with `mpiexec` as subprocesses and the
# timeline one of them measured is drawn, and (4) the cost model projects GPT-3 on 128
# nodes.

# %%
import os
import subprocess
import sys
import tempfile

import numpy as np
import matplotlib.pyplot as plt
import lezero as lz
from lezero import parallel
from lezero.nn.models.gpt import GPT, GPTConfig
# %matplotlib inline

ROOT = os.path.abspath("..") if os.path.basename(os.getcwd()) == "notebooks" else os.getcwd()

# %% [markdown]
# ## 1. Tensor parallelism, alone
# `ParallelGPT` splits every weight over the tensor group (here: a world of one, so each
# "shard" is the whole weight). It keeps the dense model's state-dict keys, so a dense
# GPT's weights load into it, and its loss -- computed from vocabulary-split logits that
# are never gathered -- equals the dense loss.

# %%
config = GPTConfig(vocab_size=11, block_size=8, n_layer=2, n_head=4, d_model=16)
lz.manual_seed(0)
dense = GPT(config)
tp = parallel.ParallelGPT(config)
parallel.load_dense_state_dict(tp, dense.state_dict())
rng = np.random.default_rng(0)
idx, tgt = rng.integers(0, 11, (2, 8)), rng.integers(0, 11, (2, 8))
print("dense loss", dense.loss(idx, tgt).item(), " tensor-parallel loss", tp.loss(idx, tgt).item())
with parallel.CommAccounting(tp) as acc:
    tp.loss(idx, tgt).backward()
print(acc.table())

# %% [markdown]
# ## 2. A schedule is data
# 1F1B for 4 stages and 8 micro-batches: the first ops, the timeline as text, the
# simulated bubble beside the theory, and the picture.

# %%
one = parallel.one_f_one_b(4, 8)
print(list(one)[:4])
print(one.text())
for m in (1, 2, 4, 8, 16, 32):
    sim = parallel.simulate(parallel.one_f_one_b(4, m))
    print(f"m={m:>2}: simulated bubble {sim.bubble:.1%}, theory "
          f"{parallel.bubble_theory('1f1b', 4, m):.1%}, peak activations {sim.peak_activations}")

# %%
fig, axes = plt.subplots(2, 1, figsize=(10, 4.5))
parallel.plot_timeline(parallel.simulate(one), ax=axes[0])
inter = parallel.interleaved_one_f_one_b(4, 8, chunks=2)
parallel.plot_timeline(parallel.simulate(inter, 0.5, 1.0), ax=axes[1])
for ax in axes:
    ax.set_xlim(0, 34)
fig.tight_layout()

# %% [markdown]
# ## 3. A bad schedule is refused before it runs
# Rank 0 waits for the gradient of micro-batch 0 while rank 1 first waits for the
# activation of micro-batch 1, which rank 0 only sends after that gradient: a cycle.

# %%
bad = [(0, 0, "F", 0), (0, 1, "B", 0), (0, 2, "F", 1), (0, 3, "B", 1),
       (1, 0, "F", 1), (1, 1, "F", 0), (1, 2, "B", 0), (1, 3, "B", 1)]
try:
    parallel.Schedule(bad, ranks=2, micro_batches=2)
except parallel.ScheduleError as e:
    print(e)

# %% [markdown]
# ## 4. Launched on several ranks
# `examples/train_pipeline.py` on two ranks: it prints the schedule before training
# (what will run) and the last step as measured (what did run), and writes both pictures.
# Then GPT-mini on `Grid(1, 2, 2)`: four ranks, tensor groups of two, two pipeline stages.

# %%
out = tempfile.mkdtemp()
mpiexec = os.path.join(os.path.dirname(sys.executable), "mpiexec")
env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", NUMBA_NUM_THREADS="1",
           PYTHONPATH=ROOT, MPLBACKEND="Agg")
env = {k: v for k, v in env.items() if not k.startswith(("PMI_", "MPI_LOCAL"))}


def launch(ranks, script, *flags):
    cmd = [mpiexec, "-n", str(ranks), sys.executable, os.path.join(ROOT, "examples", script),
           "--out", os.path.join(out, script), *flags]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    print(proc.stdout[-3000:] or proc.stderr[-3000:])


launch(2, "train_pipeline.py", "--epochs", "2", "--micro-batches", "4")

# %%
img = plt.imread(os.path.join(out, "train_pipeline.py", "measured.png"))
plt.figure(figsize=(10, 3))
plt.imshow(img)
plt.axis("off");

# %%
launch(4, "train_3d_gpt.py", "--tp", "2", "--pp", "2", "--epochs", "1", "--steps", "6")

# %% [markdown]
# ## 5. GPT-3 on 128 nodes: the cost model
# The layout of a 1024-GPU grid, and the plans the cost model of `docs/parallel.md`
# ranks best (node: 8 A100s with NVLink, 8 x 200 Gb/s InfiniBand). Efficiency is compute
# over step time, the sense of the design card's 92%.

# %%
print(parallel.GridLayout(2, 2, 2).layout())
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
from _cost_model_3d import Cluster, Model, describe, search  # noqa: E402

feasible, refused = search(Cluster(), Model())
print(f"{len(feasible)} plans fit in 80 GB, {refused} do not")
top = feasible[:6]
terms = ["compute", "bubble", "tensor", "pipeline", "data_exposed", "optimizer"]
fig, ax = plt.subplots(figsize=(9, 3))
left = np.zeros(len(top))
for term in terms:
    vals = np.array([s[term] for _, s in top])
    ax.barh([describe(p) for p, _ in top], vals, left=left, label=term)
    left += vals
for i, (_, s) in enumerate(top):
    ax.text(left[i], i, f" {s['efficiency']:.0%}", va="center", fontsize=8)
ax.invert_yaxis()
ax.set_xlabel("seconds per step")
ax.legend(fontsize=7, ncol=3)
fig.tight_layout()
