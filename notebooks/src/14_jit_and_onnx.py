# %% [markdown]
# # 14. Static graphs and ONNX
#
# This notebook follows `steps/step50.py` to `steps/step53.py` and `steps/step66.py`.
# LeZero is define-by-run: every call builds its graph as it goes. `lezero.jit.trace`
# runs a model once and keeps the operators that run executed as a static graph, which
# can be optimised by passes, replayed without the Python that built it, saved to a
# `.lzg` file, and exported to ONNX for other runtimes. We draw a graph before and after the passes,
# time the replay against eager execution, run the exported model in onnxruntime, and
# then check that ONNX gives no silent answers: a padded mask, a torch-exported ViT and
# ONNX's own operator cases.

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

# %% [markdown]
# ## ONNX without silent answers: a padded mask
# This part follows `steps/step66.py`. A trace freezes whatever was computed outside
# LeZero operators, so an exported file could ignore an input and still validate on the
# example. BERT computes its attention bias as `(1 - mask) * min` with LeZero operators:
# exported with an all-ones mask and a dynamic batch and sequence, the file keeps
# `attention_mask` as an input and gives LeZero's logits on a padded mask at another
# size. The exporter checks this by tracing again with other input values (an all-ones
# mask becomes zeros) and refuses a model whose constants changed; `jit.trace` runs the
# same check.

# %%
import warnings
import onnxruntime
from lezero.nn import models

rng = np.random.default_rng(0)
lz.manual_seed(0)
bert = models.BertForMaskedLM(vocab_size=99, hidden_size=32, num_hidden_layers=2,
                              num_attention_heads=4, intermediate_size=37).eval()
axes = {0: "batch", 1: "sequence"}
with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "bert.onnx")
    print(onnx.export(bert, (rng.integers(0, 99, (2, 5)), np.ones((2, 5), np.int64)), path,
                      input_names=["input_ids", "attention_mask"], output_names=["logits"],
                      dynamic_axes={"input_ids": axes, "attention_mask": axes,
                                    "logits": axes}))
    session = onnxruntime.InferenceSession(path, sess_options=onnx.session_options(),
                                           providers=["CPUExecutionProvider"])
    ids = rng.integers(0, 99, (3, 7))
    padded = np.array([[1] * 7, [1] * 4 + [0] * 3, [1] * 2 + [0] * 5])
    (logits,) = session.run(None, {"input_ids": ids, "attention_mask": padded})
with lz.no_grad():
    print(f"batch 3 x 7, padded mask: max |onnxruntime - LeZero| "
          f"{np.abs(logits - bert(ids, padded).data).max():.1e}")

# %% [markdown]
# Padding weights computed with NumPy on the ids' array are refused, naming the node,
# rather than written with this example's padding frozen in; the same weights from
# LeZero operators (`min(ids, 1)`) export and follow other padding. TextCNN's embedding
# only *scales its gradient* at padding positions (an attribute the forward never
# reads), so it traces from a padded example and replays other padding.

# %%
class MeanOfTokens(nn.Module):
    """The mean embedding of the non-padding tokens (id 0 pads)."""

    def __init__(self, in_numpy):
        super().__init__()
        self.embed, self.in_numpy = nn.Embedding(12, 4, padding_idx=0), in_numpy

    def forward(self, ids):
        ids = ids if isinstance(ids, lz.Variable) else lz.Variable(ids, requires_grad=False)
        if self.in_numpy:
            real = lz.Variable((ids.data != 0).astype(np.float32), requires_grad=False)
        else:
            real = F.minimum(ids.to(dtype=np.float32), 1.0)
        summed = F.sum(self.embed(ids.data) * F.expand_dims(real, -1), axis=1)
        return summed / F.sum(real, axis=1, keepdims=True)


src = np.array([[5, 7, 9, 0, 0], [3, 4, 2, 8, 1]])
other = np.array([[2, 0, 0, 0, 0], [9, 9, 4, 1, 0]])
with tempfile.TemporaryDirectory() as tmp:
    for in_numpy in (True, False):
        lz.manual_seed(0)
        pool, path = MeanOfTokens(in_numpy), os.path.join(tmp, "mean.onnx")
        try:
            onnx.export(pool, src, path, input_names=["ids"])
        except onnx.ExportError as e:
            print("NumPy weights:", str(e)[:140], "...")
            continue
        session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
        with lz.no_grad():
            print(f"LeZero operators: other padding, onnxruntime vs LeZero "
                  f"{np.abs(session.run(None, {'ids': other})[0] - pool(other).data).max():.1e}")
textcnn = models.get_model("textcnn", vocab_size=30, num_classes=4, embed_dim=8,
                           kernel_sizes=(2, 3), num_filters=4).eval()
traced = jit.trace(textcnn, src)
with lz.no_grad():
    print(f"TextCNN replay vs eager on other padding: "
          f"{np.abs(traced(other).data - textcnn(other).data).max():.1e}")

# %% [markdown]
# ## Importing what PyTorch writes
# torchvision's ViT exported by `torch.onnx.export(..., dynamo=False, opset_version=17)`
# with a dynamic batch loads as a LeZero module and matches torch at two batch sizes
# (this cell needs torch and torchvision; without them it says so).

# %%
try:
    import torch
    from lezero.testing.oracles import import_torchvision
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tv = import_torchvision()
except ImportError as e:
    torch = None
    print(f"skipped: {e.name} is not installed")
if torch is not None:
    torch.manual_seed(0)
    vit = tv.models.VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2,
                                      hidden_dim=16, mlp_dim=32, num_classes=5).eval()
    with torch.no_grad():
        vit.heads.head.weight.normal_(0, 0.1)      # torchvision zero-initialises it
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        path = os.path.join(tmp, "vit.onnx")
        torch.onnx.export(vit, (torch.randn(2, 3, 32, 32),), path, dynamo=False,
                          opset_version=17, input_names=["images"], output_names=["logits"],
                          dynamic_axes={"images": {0: "batch"}, "logits": {0: "batch"}})
        imported = onnx.load(path)
    for batch in (2, 3):
        images = torch.randn(batch, 3, 32, 32)
        with torch.no_grad(), lz.no_grad():
            diff = np.abs(imported(images.numpy()).data - vit(images).numpy()).max()
        print(f"batch {batch}: max |LeZero - torch| {diff:.1e}")

# %% [markdown]
# ## ONNX's own node cases
# ONNX ships a test case per operator variant; `lezero.onnx.backend` is the
# `onnx.backend.base.Backend` that `onnx.backend.test.BackendTest` runs over all of them
# in `make test` (`python tools/onnx_suite.py` prints the per-operator table). Each
# module of `onnx.backend.test.case.node` builds its cases when imported, so a few
# operators load quickly. An answer must match in dtype and shape and within rtol 1e-3,
# atol 1e-7; anything LeZero cannot compute is refused with an error that says what.

# %%
import importlib
import onnx.backend.test.case.node as node_cases
import lezero.onnx.backend as backend
from onnx import numpy_helper


def as_array(v):
    return numpy_helper.to_array(v) if hasattr(v, "raw_data") else np.asarray(v)


def outcome(case):
    (inputs, expected), = case.data_sets
    try:
        got = backend.prepare(case.model).run([as_array(v) for v in inputs])
    except (onnx.OnnxImportError, TypeError):
        return "refused"
    for out, ref in zip(map(np.asarray, got), map(as_array, expected)):
        if out.dtype != ref.dtype or out.shape != ref.shape or not np.allclose(
                out, ref, rtol=1e-3, atol=1e-7, equal_nan=True):
            return "wrong"
    return "pass"


counts = {}
with warnings.catch_warnings(), np.errstate(all="ignore"):
    warnings.simplefilter("ignore")
    for op, module in {"Div": "div", "Mod": "mod", "ArgMax": "argmax",
                       "LayerNormalization": "layernormalization",
                       "CastLike": "castlike"}.items():
        before = len(node_cases._NodeTestCases)
        importlib.import_module(f"onnx.backend.test.case.node.{module}")
        rows = [outcome(c) for c in node_cases._NodeTestCases[before:]]
        counts[op] = {k: rows.count(k) for k in ("pass", "refused", "wrong")}
print(counts)

fig, ax = plt.subplots(figsize=(6, 2.8))
left = np.zeros(len(counts))
for kind, color in (("pass", "seagreen"), ("refused", "orange"), ("wrong", "crimson")):
    widths = [c[kind] for c in counts.values()]
    ax.barh(list(counts), widths, left=left, color=color, label=kind)
    left += widths
ax.set_xlabel("ONNX node cases (with their '_expanded' forms)")
ax.legend(loc="lower right")
plt.tight_layout()
plt.show()
