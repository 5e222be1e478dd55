"""Step 64: where does my model's memory go?

A training step's memory is mostly what the graph keeps for backward, from the moment
forward returns until backward has used it.  Four ways to see it, on ResNet-18:

* **tracemalloc**: NumPy reports every buffer to Python's ``tracemalloc``, so the bytes
  traced after forward (minus before) are what the step keeps, as the process sees it;
  its peak is the step's peak.  This is the figure to trust, and to compare with PyTorch.
* ``lz.memory.profile(model)`` names each kept array: shape, dtype, the operator and the
  module that keep it, and why (an input, or an array the operator stored).
* Each operator keeps only what its backward reads (``Function.save_inputs``); an input it
  does not read is held as an ``InputRef`` (the graph edge, shape, dtype: no array), so an
  intermediate nobody else holds is freed as soon as forward returns.
* What could be recomputed (a convolution's transformed input) is kept only inside the
  memory policy's budget, ``lz.memory.policy.transform_cache_bytes``.
Mixed precision and checkpointing then buy memory; both are measured the same way.
Run: python steps/step64.py
"""
import contextlib
import gc
import io
import tracemalloc
import weakref

import numpy as np

import lezero as lz
import lezero.functions as F
import lezero.runtime
from lezero import amp
from lezero.nn.models import resnet18

MiB = 2 ** 20
rng = np.random.default_rng(0)
lz.manual_seed(0)
model = resnet18(num_classes=10, small_input=True)       # the CIFAR stem: 32x32 images
x = rng.standard_normal((16, 3, 32, 32)).astype(np.float32)
t = rng.integers(0, 10, 16)


def loss_of(body=None):
    """The training loss; ``body`` replaces the residual stages (layer1..layer4)."""
    h = model.maxpool(model.relu(model.bn1(model.conv1(x))))
    h = body(h) if body else model.layer4(model.layer3(model.layer2(model.layer1(h))))
    return F.cross_entropy(model.fc(F.flatten(model.avgpool(h), 1)), t)


def without_transforms(op):
    """``op()`` with the transform budget at 0: nothing recomputable is kept."""
    with lz.memory.policy.using(transform_cache_bytes=0):
        return op()


def measured(forward, inspect=None, within=None):
    """(bytes traced once forward returns, peak of forward + backward), both above what
    was alive before; ``inspect(loss)`` runs while the graph is alive, ``within`` (a
    context, a profiler) spans the step inside the count."""
    model.zero_grad()                                    # each step allocates its gradients
    gc.collect()
    tracemalloc.start()
    try:
        with within or contextlib.nullcontext():
            base = tracemalloc.get_traced_memory()[0]
            loss = forward()
            kept = tracemalloc.get_traced_memory()[0] - base
            if inspect:
                inspect(loss)
            loss.backward()
            peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    return kept, peak


def report(label, kept, peak):
    print(f"  {label:<34} kept after forward {kept / MiB:7.1f} MiB, "
          f"step peak {peak / MiB:7.1f} MiB")


measured(loss_of)                   # warm: compiled kernels, the autotuner's choices
print("1. one training step, ResNet-18 batch 16 of 3x32x32, measured by tracemalloc:")
held = []                           # the transforms kept, read while the graph lives
kept32, peak32 = measured(loss_of, lambda loss: held.append(lz.memory.kept_transforms()))
report("float32", kept32, peak32)

# 2. The profiler names what is kept.  Run inside the same tracemalloc count: its
#    activation figure (saved arrays, parameters excluded) is nearly all that was traced.
print("\n2. lz.memory.profile(model): the largest arrays kept, by whom")
prof = lz.memory.profile(model)
traced, _ = measured(loss_of, lambda loss: prof.print_saved(limit=6), within=prof)
print(f"  profiler: {prof.peak_activation_bytes / MiB:.1f} MiB of activations; tracemalloc: "
      f"{traced / MiB:.1f} MiB (also logits, loss, the graph's Python objects); "
      f"ratio {prof.peak_activation_bytes / traced:.3f}")
print("  peak per module (MiB):", {name: round(b / MiB, 1)
                                   for name, b in list(prof.by_module().items())[1:6]})
print("  summary (MiB):", {k: round(v / MiB, 1) for k, v in prof.summary().items()})

# 3. What each operator keeps, on a small batch.  Its input is made by `v * 1.0`, so it
#    is an intermediate (a leaf that requires grad counts as a parameter and is hidden).
print("\n3. what each operator keeps for backward (save_inputs says which inputs it reads):")
v = lz.Variable(rng.standard_normal((8, 16, 12, 12)).astype(np.float32), requires_grad=True)
w = lz.Parameter(rng.standard_normal((16, 16, 3, 3)).astype(np.float32) * 0.1)
ones, zeros = np.ones(16, np.float32), np.zeros(16, np.float32)
ops = {"relu": lambda: F.relu(v * 1.0),
       "batch_norm": lambda: F.batch_norm(v * 1.0, zeros, ones, lz.Parameter(ones),
                                          lz.Parameter(zeros), training=True),
       "add": lambda: v * 1.0 + v * 2.0,
       "dropout": lambda: F.dropout(v * 1.0, 0.5, training=True),
       "conv2d": lambda: F.conv2d(v * 1.0, w, padding=1),
       "conv2d, budget 0": lambda: without_transforms(ops["conv2d"])}
print(f"  each one's input: float32{list(v.shape)}")
for name, op in ops.items():
    rows = [r for r in lz.memory.saved_residuals(op) if r.op != "Mul"]
    kept = ", ".join(f"{r.role} {r.dtype}{list(r.shape)}" for r in rows) or "nothing"
    print(f"  {name:<16} keeps {kept}")
print("  relu: y > 0 exactly where x > 0, and the next operator keeps y anyway; batch norm "
      "recomputes\n  x-hat from x and per-channel statistics; add passes the gradient on; "
      "dropout needs\n  only which elements it kept (a bool, 1 byte each); a convolution needs "
      "its input for the\n  weight gradient, and recomputes its transform when the budget "
      "(section 4) is spent.")

h = v * 2.0                                   # an intermediate...
y = F.relu(h)                                 # ...read by ReLU, whose backward does not read it
gone = weakref.ref(h)
del h
print(f"  ReLU.save_inputs = {type(y.creator).save_inputs}; it holds {y.creator.inputs[0]}; "
      f"the intermediate is freed: {gone() is None}")
v.cleargrad()
y.backward(grad=np.ones(y.shape, np.float32))
print("  backward still right:", np.array_equal(v.grad.data, 2.0 * (v.data > 0)))

# 4. The memory policy: a convolution keeps its transformed input (Winograd tiles, im2col
#    columns) for backward only inside a process-wide budget, else recomputes it there.
policy = lz.memory.policy
print(f"\n4. policy.transform_cache_bytes = {policy.transform_cache_bytes / MiB:.0f} MiB:")
listing = io.StringIO()
lezero.runtime.show(file=listing)             # every setting, its value and its source
print("  lezero.runtime.show() lists it:")
print("\n".join(line for line in listing.getvalue().splitlines() if "transform_cache" in line))
print(f"  transforms kept while the graph was alive (section 1): {held[0] / MiB:.1f} MiB")
report(f"budget {policy.transform_cache_bytes / MiB:.0f} MiB (the default)", kept32, peak32)
kept0, peak0 = without_transforms(
    lambda: measured(loss_of, lambda loss: held.append(lz.memory.kept_transforms())))
report(f"budget 0 (kept {held[1] / MiB:.1f} MiB)", kept0, peak0)

# 5. Two tools that buy memory, measured the same way.
print("\n5. buying memory:")
with amp.autocast("float16"):
    kept16, peak16 = measured(loss_of)
report("autocast float16", kept16, peak16)
blocks = [*model.layer1, *model.layer2, *model.layer3, *model.layer4]
segments = lz.checkpoint_sequential(blocks, "sqrt")
keptc, peakc = measured(lambda: loss_of(segments))
report(f"checkpoint_sequential {segments.segments}", keptc, peakc)
print(f"  against float32: autocast keeps {kept16 / kept32:.2f}x (peak {peak16 / peak32:.2f}x), "
      f"checkpointing {keptc / kept32:.2f}x (peak {peakc / peak32:.2f}x)")
grads = sum(p.data.nbytes for p in model.parameters())
print(f"  backward's peak also holds the parameters' gradients ({grads / MiB:.1f} MiB) and, "
      "when\n  checkpointing, one segment recomputed: it pays most where activations "
      "dwarf the weights.")
