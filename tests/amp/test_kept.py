"""What autocast keeps for backward: low-precision arrays only, about half of float32's bytes.

Measured as a user would (``tracemalloc``, which NumPy reports every buffer to) and per
operator with ``lz.memory.saved_residuals``.
"""
import contextlib
import gc
import tracemalloc

import numpy as np
import pytest

import lezero as lz
import lezero.functions as F
from lezero import amp, nn, runtime
from lezero.checkpoint import checkpoint
from lezero.core import FunctionHook, get_config, using_config
from lezero.nn.models.resnet import BasicBlock

LOW = ["float16", "bfloat16"]


def _low(name):
    """The NumPy dtype autocast(name) stores (bfloat16 needs ml_dtypes)."""
    if name == "bfloat16":
        pytest.importorskip("ml_dtypes")
    return amp.autocast(name).dtype


def _image(shape, seed=0):
    rng = np.random.default_rng(seed)
    return lz.Variable(rng.standard_normal(shape).astype(np.float32), requires_grad=False)


def _kept_bytes(forward):
    """Bytes allocated by ``forward()`` and still alive once it returns (tracemalloc), and
    the loss it returned (alive, so its graph is too)."""
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        out = forward()
        return tracemalloc.get_traced_memory()[0] - base, out
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("name", LOW)
def test_a_convolution_keeps_its_low_precision_input_and_no_float32_copy(name):
    low = _low(name)
    conv = nn.Conv2d(16, 16, 3, padding=1)
    x = _image((4, 16, 16, 16))           # 16384 values: the fast (Numba) conversion path
    rows = lz.memory.saved_residuals(amp.autocast(name)(lambda: conv(F.relu(x))))
    held = [r for r in rows if r.op == "Conv"]
    assert [r.dtype for r in held if r.role == "input 0"] == [low.name]
    big_float32 = [r for r in held if r.dtype == "float32" and r.nbytes >= x.data.nbytes // 2]
    assert big_float32 == [], f"float32 arrays kept by the convolution: {big_float32}"


def _block_kept(name, enabled):
    """Bytes a training forward of a stem conv and a ResNet basic block leaves alive under
    ``autocast(name, enabled)``, after a warm-up step; then backward runs on them."""
    lz.manual_seed(0)
    stem, block = nn.Conv2d(3, 32, 3, padding=1), BasicBlock(32, 32)
    x, t = _image((8, 3, 16, 16)), np.arange(8) % 4

    def step():
        with amp.autocast(name, enabled=enabled):
            h = block(F.relu(stem(x)))
            return F.cross_entropy(F.mean(h, axis=(2, 3))[:, :4], t)
    step().backward()                              # warm up: kernels, scratch buffers
    kept, loss = _kept_bytes(step)
    loss.backward()                                # what was kept is what backward needs
    assert all(p.grad.dtype == np.float32 for p in block.parameters())
    return kept


@pytest.mark.parametrize("name", LOW)
@pytest.mark.parametrize("setup", ["default", "must_keep"])
def test_a_resnet_block_keeps_at_most_0_6_of_float32(name, setup):
    """``default``: as a user runs it (float32 may keep conv transforms in the memory
    budget); ``must_keep``: no transform budget and serial convolutions, so both sides keep
    only what backward cannot do without."""
    _low(name)
    with contextlib.ExitStack() as stack:
        if setup == "must_keep":
            stack.enter_context(runtime.policy.using(transform_cache_bytes=0))
            stack.enter_context(using_config("conv_threads", 1))
        kept32, kept_low = _block_kept(name, False), _block_kept(name, True)
    assert kept_low <= 0.6 * kept32, (kept_low, kept32)


@pytest.mark.parametrize("name", LOW)
def test_normalization_and_activation_keep_the_low_dtype(name):
    low = _low(name)
    bn = nn.BatchNorm2d(16)
    x = _image((4, 16, 16, 16))
    conv = nn.Conv2d(16, 16, 3, padding=1)
    rows = lz.memory.saved_residuals(amp.autocast(name)(lambda: F.relu(bn(conv(x)))))
    large = [r for r in rows if r.nbytes >= x.data.size * low.itemsize]
    assert large and all(r.dtype == low.name for r in large), large


@pytest.mark.parametrize("name", LOW)
@pytest.mark.parametrize("reduce", [lambda y: F.mean(y, axis=1), lambda y: F.var(y, axis=1),
                                    lambda y: F.logsumexp(y, axis=1)],
                         ids=["mean", "var", "logsumexp"])
def test_reductions_torch_accumulates_in_float32_keep_the_low_input(name, reduce):
    low = _low(name)
    x, w = _image((8, 64)), lz.Variable(np.eye(64, dtype=np.float32))
    with amp.autocast(name):
        y = F.linear(x, w)
        out = reduce(y)
    assert out.dtype == low                                 # torch.autocast's dtype
    f = out.creator
    # no float32 copy held: the low input itself (mean keeps not even that: an InputRef)
    assert f.inputs[0] is y or isinstance(f.inputs[0], lz.core.InputRef)
    assert f.inputs[0].dtype == low
    want = reduce(lz.Variable(y.data.astype(np.float32))).data.astype(low)
    np.testing.assert_array_equal(out.data, want)          # float32 inside, rounded once
    F.sum(out).backward()
    assert w.grad.dtype == np.float32 and np.isfinite(w.grad.data).all()


def test_a_cast_keeps_no_input_and_cross_entropy_keeps_the_low_logits():
    lin = nn.Linear(16, 10)
    with amp.autocast():
        logits = lin(lz.Variable(_image((8, 16)).data) * 2.0)   # float32, cast for lin
        loss = F.cross_entropy(logits, np.arange(8) % 10)
    ce = loss.creator
    assert loss.dtype == np.float32                           # the loss stays float32
    assert isinstance(ce.inputs[0], lz.core.InputRef)         # the float16 logits are gone
    assert ce.logits.dtype == np.float16 and not hasattr(ce, "exp")
    up = ce.inputs[0].creator.inputs[0].creator               # lin's input cast
    assert isinstance(up, amp.Cast) and up.save_inputs == ()
    assert isinstance(up.inputs[0], lz.core.InputRef)         # its float32 input is gone
    loss.backward()
    assert lin.weight.grad.dtype == np.float32


class _CastsOfLeaves(FunctionHook):
    """Counts the casts made of leaf Variables (parameters)."""

    def __init__(self):
        self.count = 0

    def transform_inputs(self, function, inputs):
        x = inputs[0]
        if isinstance(function, amp.Cast) and x.creator is None and x.requires_grad:
            self.count += 1
        return inputs


@pytest.mark.parametrize("name", LOW)
@pytest.mark.parametrize("checkpointed", [False, True], ids=["plain", "checkpoint"])
def test_parameters_are_cast_once_per_region_and_once_per_recomputation(name, checkpointed):
    _low(name)
    lin = nn.Linear(8, 8)

    def block(h):
        for _ in range(3):                       # the same weight and bias, three times
            h = F.tanh(lin(h))
        return h
    x = lz.Variable(np.ones((4, 8), np.float32), requires_grad=False)
    counter = _CastsOfLeaves()
    with using_config("function_hooks", get_config().function_hooks + (counter,)):
        with amp.autocast(name):
            y = checkpoint(block, x) if checkpointed else block(x)
            assert counter.count == 2            # weight and bias
            F.sum(y).backward()
    assert counter.count == (4 if checkpointed else 2)     # the recomputation: once more
    assert lin.weight.grad.dtype == np.float32


@pytest.mark.parametrize("name", LOW)
def test_python_scalars_do_not_widen_the_low_dtype(name):
    """NumPy makes a Python float float64 next to bfloat16; autocast follows torch (a
    scalar takes the tensor's dtype), so no activation becomes a float64 array."""
    low = _low(name)
    x, w = _image((4, 8)), lz.Variable(np.eye(8, dtype=np.float32))
    with amp.autocast(name):
        y = F.linear(x, w)
        assert [(y * 0.5).dtype, (1.0 + y).dtype, (y / 3).dtype] == [low] * 3
        assert (F.var(y, axis=1) ** 0.5).dtype == np.float32      # a float32 operator
        lrn = F.local_response_norm(F.reshape(y, (1, 4, 8)), 3)
    assert lrn.dtype == np.float32
    F.sum(lrn).backward()
    assert w.grad.dtype == np.float32


def _mlp_step(backward_inside):
    lz.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(),
                          nn.Linear(32, 10))
    x, t = _image((8, 16)), np.arange(8) % 10
    with amp.autocast():
        loss = F.cross_entropy(model(x), t)
        if backward_inside:
            loss.backward()
    if not backward_inside:
        copy = loss.creator.inputs[0].creator.inputs[1]          # the last weight's copy
        assert type(copy) is amp.copies.ParamCopy
        assert lz.Variable.data.__get__(copy) is None            # dropped with the region
        assert copy.shape == (10, 32) and copy.dtype == np.float16
        loss.backward()
    return [p.grad.data for p in model.parameters()]


def test_weight_copies_are_dropped_after_the_region_and_recast_in_backward():
    for a, b in zip(_mlp_step(False), _mlp_step(True)):
        np.testing.assert_array_equal(a, b)        # the recast copy is the same copy


class _Order(FunctionHook):
    def __init__(self):
        self.names = []

    def backward_postprocess(self, function, grad_outputs):
        self.names.append(type(function).__name__)


def test_a_weight_cast_runs_right_after_its_last_consumer():
    model = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(),
                          nn.Linear(32, 10))
    with amp.autocast():
        loss = F.sum(model(_image((8, 16))))
    order = _Order()
    with lz.using_config("function_hooks", (order,)):
        loss.backward()
    linears = [i for i, n in enumerate(order.names) if n == "Linear"]
    # each Linear's weight (and bias) casts come before the next Linear's backward
    for a, b in zip(linears, linears[1:]):
        assert "Cast" in order.names[a + 1:b], order.names
