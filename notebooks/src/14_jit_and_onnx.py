# %% [markdown]
# # 14. Static graphs and ONNX
#
# This notebook follows `steps/step50.py` to `steps/step53.py`. LeZero is define-by-run:
# every call builds its graph as it goes. `lezero.jit.trace` runs a model once and
# keeps the operators that run executed as a static graph, which can be optimised by
# passes, replayed without the Python that built it, saved to a `.lzg` file, and
# exported to ONNX for other runtimes. We draw a graph before and after the passes,
# time the replay against eager execution, and run the exported model in onnxruntime.

# %%
import io
import os
import shutil
import subprocess
import tempfile
import time

import numpy as np
import matplotlib.pyplot as plt
import lezero as lz
import lezero.functions as F
from lezero import jit, nn, onnx
from lezero.jit import passes
# %matplotlib inline

import numba
from threadpoolctl import threadpool_limits
threadpool_limits(1)
numba.set_num_threads(1)

# %% [markdown]
# ## A small network, traced
# A convolution with batch norm and an activation, a residual sum and a head: enough to
# give every pass something to do. In eval mode batch norm is an affine map with
# constants computed from the running statistics.

# %%
class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.skip = nn.Conv2d(3, 8, 1)
        self.head = nn.Linear(8, 4)

    def forward(self, x):
        h = F.relu(self.bn(self.conv(x))) + self.skip(x)
        h = F.hardswish(h * 0.5 + 0.1)
        return self.head(F.mean(h, axis=(2, 3)))


lz.manual_seed(0)
net = Block().eval()
x = np.random.default_rng(0).standard_normal((4, 3, 16, 16)).astype(np.float32)
raw = jit.trace(net, x, optimize=False).graph
print(raw)

# %% [markdown]
# ## The passes, one at a time
# `freeze` makes the weights constants (inference only), so constant folding can
# compute batch norm's scale and shift once; CSE merges equal constants; fusion turns
# each chain of elementwise operators into one generated Numba kernel; the memory plan
# frees values after their last use and lets a fused kernel write over a dying input.

# %%
g = passes.freeze(raw)
for name in ("dce", "fold", "cse", "fuse", "memory"):
    g = passes.PASSES[name](g)
    print(f"after {name:<7} {len(g.nodes):2d} nodes  {dict(g.op_counts())}")
print()
print(g)
print(g.meta["memory"])

# %% [markdown]
# ## Drawing the graph before and after
# `Graph.to_dot()` gives Graphviz DOT text. Where Graphviz's `dot` is installed it
# renders the pictures; otherwise matplotlib draws the nodes in layers by depth (every
# node one row below the deepest node it reads).

# %%
def render_dot(graph):
    png = subprocess.run(["dot", "-Tpng"], input=graph.to_dot().encode(),
                         capture_output=True, check=True).stdout
    return plt.imread(io.BytesIO(png), format="png")


def draw_layers(graph, ax):
    producers = graph.producers()
    index = {id(n): k for k, n in enumerate(graph.nodes)}
    depth, rows = {}, {}
    for k, node in enumerate(graph.nodes):
        srcs = [index[id(producers[d])] for d in node.deps() if d in producers]
        depth[k] = 1 + max((depth[s] for s in srcs), default=0)
        rows.setdefault(depth[k], []).append(k)
    pos = {k: ((i + 1) / (len(row) + 1), -d) for d, row in rows.items()
           for i, k in enumerate(row)}
    for k, node in enumerate(graph.nodes):
        for d in node.deps():
            if d in producers:
                (x0, y0), (x1, y1) = pos[index[id(producers[d])]], pos[k]
                ax.annotate("", (x1, y1 + 0.15), (x0, y0 - 0.15),
                            arrowprops=dict(arrowstyle="->", color="grey"))
        label = node.op if node.sub is None else "Fused\n" + "\n".join(s.op for s in node.sub)
        ax.text(*pos[k], label, ha="center", va="center", fontsize=7,
                bbox=dict(boxstyle="round", fc="palegreen" if node.sub else "lightblue"))
    ax.set_ylim(-max(rows) - 0.7, -0.3)


fig, axes = plt.subplots(1, 2, figsize=(11, 7))
for ax, (title, graph) in zip(axes, (("as traced", raw), ("after the passes", g))):
    if shutil.which("dot"):
        ax.imshow(render_dot(graph))
    else:
        draw_layers(graph, ax)
    ax.set_title(f"{title}: {len(graph.nodes)} nodes")
    ax.axis("off")
plt.tight_layout()
plt.show()

# %% [markdown]
# ## Replay against eager execution
# The replay runs each Function's `forward` on arrays: no Variables, no module code, no
# argument checks. Same outputs; less Python per call. The Numba kernels compile on
# their first call (and are cached on disk), so we time after a warm-up.

# %%
plain = jit.trace(net, x, fuse=False)
fused = jit.trace(net, x, freeze=True)
with lz.no_grad():
    ref = net(x).data
    for label, run in (("replay", plain), ("replay + fusion", fused)):
        print(f"{label:<16} max difference {np.abs(run(x).data - ref).max():.1e}")


def best(fn, n=30):
    with lz.no_grad():
        fn()
        times = []
        for _ in range(n):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    return min(times) * 1e3


timing = {"eager": best(lambda: net(x)), "replay": best(lambda: plain(x)),
          "replay + fusion": best(lambda: fused(x))}
plt.figure(figsize=(5, 2.5))
plt.barh(list(timing), list(timing.values()), color=["grey", "steelblue", "seagreen"])
plt.xlabel("ms per call (best of 30, one thread)")
plt.title("Block forward, batch 4")
plt.tight_layout()
plt.show()
print({k: round(v, 3) for k, v in timing.items()})

# %% [markdown]
# ## Save, load, export
# A `.lzg` file holds the graph as JSON and the weights as safetensors; `jit.load` runs
# it without the `Block` class. `onnx.export` writes the same model as ONNX (checked by
# `onnx.checker`, compared with onnxruntime), here with a dynamic batch axis, and
# `onnx.load` reads it back as a LeZero module.

# %%
tmp = tempfile.mkdtemp()
path = fused.save(os.path.join(tmp, "block.lzg"))
loaded = jit.load(path)
with lz.no_grad():
    print(f"{os.path.getsize(path)} bytes; loaded vs eager: "
          f"{np.abs(loaded(x).data - ref).max():.1e}")

report = onnx.export(net, x, os.path.join(tmp, "block.onnx"),
                     dynamic_axes={"input_0": {0: "batch"}})
print(report)
back = onnx.load(os.path.join(tmp, "block.onnx"))
with lz.no_grad():
    print(f"imported ONNX vs eager: {np.abs(back(x).data - ref).max():.1e}")
shutil.rmtree(tmp)
