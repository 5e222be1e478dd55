"""amp.autocast: dtypes per the policy, float32 master gradients, regions, threads, errors."""
import inspect
import threading

import numpy as np
import pytest

import lezero as lz
import lezero.functions as F
from lezero import amp, nn


def var(*shape, seed=0, grad=True):
    rng = np.random.default_rng(seed)
    return lz.Variable(rng.standard_normal(shape).astype(np.float32), requires_grad=grad)


def test_operators_get_the_dtypes_the_policy_gives():
    x, w, b = var(4, 3), var(5, 3, seed=1), var(5, seed=2)
    with amp.autocast():
        y = F.linear(x, w, b)                 # lower
        s = F.softmax(y, axis=1)              # float32
        r = F.relu(y)                         # passthrough
        a = y + b                             # widest: float16 + float32 -> float32
        m = y * y                             # widest, one dtype: stays float16
    assert (y.dtype, s.dtype, r.dtype, a.dtype, m.dtype) == (
        np.float16, np.float32, np.float16, np.float32, np.float16)
    assert type(y.creator).__name__ == "Linear"
    assert all(type(v.creator).__name__ == "Cast" for v in y.creator.inputs)


def test_parameters_stay_float32_and_get_float32_gradients():
    lin = nn.Linear(3, 4)
    with amp.autocast():
        loss = F.cross_entropy(lin(var(6, 3, grad=False)), np.array([0, 1, 2, 3, 0, 1]))
    assert loss.dtype == np.float32
    loss.backward()
    assert lin.weight.dtype == np.float32 and lin.weight.grad.dtype == np.float32
    assert lin.bias.grad.dtype == np.float32


def test_numpy_computes_in_float32_and_rounds_to_float16():
    x, w = var(8, 16), var(16, 4, seed=1)
    with amp.autocast():
        y = F.matmul(x, w)
    x16, w16 = x.data.astype(np.float16), w.data.astype(np.float16)
    want = (x16.astype(np.float32) @ w16.astype(np.float32)).astype(np.float16)
    np.testing.assert_array_equal(y.data, want)
    y.backward(grad=np.ones((8, 4), np.float16))
    gy = np.ones((8, 4), np.float32)
    want_gx = (gy @ w16.astype(np.float32).T).astype(np.float16).astype(np.float32)
    np.testing.assert_array_equal(x.grad.data, want_gx)
    assert x.grad.dtype == np.float32


def test_backward_inside_the_region_equals_backward_outside():
    lin = nn.Linear(3, 3)
    x = var(2, 3, grad=False)
    grads = []
    for inside in (False, True):
        lin.zero_grad()
        with amp.autocast():
            loss = (F.tanh(lin(x)) ** 2).sum()
            if inside:
                loss.backward()
        if not inside:
            loss.backward()
        grads.append(lin.weight.grad.data.copy())
    np.testing.assert_array_equal(*grads)


def test_regions_nest_and_enabled_false_turns_it_off():
    x, w = var(2, 3), var(4, 3, seed=1)
    with amp.autocast():
        with amp.autocast(enabled=False):
            assert not amp.is_autocast_enabled()
            assert F.linear(x, w).dtype == np.float32
        assert amp.is_autocast_enabled() and amp.get_autocast_dtype() == np.float16
        assert F.linear(x, w).dtype == np.float16
    assert not amp.is_autocast_enabled() and amp.get_autocast_dtype() is None


def test_decorator_and_module_wrapper_keep_the_signature():
    lin = nn.Linear(3, 2)
    wrapped = amp.autocast()(lin)
    assert inspect.signature(wrapped) == inspect.signature(lin.forward)
    assert wrapped(var(1, 3)).dtype == np.float16
    assert lin(var(1, 3)).dtype == np.float32          # the module itself is unchanged

    @amp.autocast()
    def f(a, b=2.0):
        return F.matmul(a, a.T) * b
    assert list(inspect.signature(f).parameters) == ["a", "b"]
    assert f(var(2, 3)).dtype == np.float16


def test_another_thread_does_not_see_the_region():
    x, w = var(2, 3), var(4, 3, seed=1)
    seen = []
    with amp.autocast():
        t = threading.Thread(target=lambda: seen.append(F.linear(x, w).dtype))
        t.start()
        t.join()
        assert F.linear(x, w).dtype == np.float16
    assert seen == [np.float32]


def test_a_weight_is_cast_once_per_region():
    lin = nn.Linear(3, 3)
    with amp.autocast():
        a, b = lin(var(2, 3)), lin(var(2, 3, seed=1))
    assert a.creator.inputs[1] is b.creator.inputs[1]          # the cached float16 copy
    with amp.autocast(cache_enabled=False):
        a, b = lin(var(2, 3)), lin(var(2, 3, seed=1))
    assert a.creator.inputs[1] is not b.creator.inputs[1]


def test_double_backward_through_a_region():
    x = lz.Variable(np.array([0.5, -0.25], np.float32))
    w = lz.Variable(np.array([[1.5, -0.5], [0.25, 2.0]], np.float32))
    with amp.autocast():
        y = (F.tanh(F.matmul(w, x)) ** 2).sum()
    g, = lz.grad(y, x, create_graph=True)
    assert g.dtype == np.float32
    h, = lz.grad(g.sum(), x)
    # float32 reference of the same function
    y32 = (F.tanh(F.matmul(w, x)) ** 2).sum()
    g32, = lz.grad(y32, x, create_graph=True)
    h32, = lz.grad(g32.sum(), x)
    np.testing.assert_allclose(h.data, h32.data, rtol=2e-2, atol=2e-3)


def test_convolutional_net_with_batch_norm_trains_under_autocast():
    net = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                        nn.MaxPool2d(2), nn.Flatten(), nn.Linear(4 * 4 * 4, 3))
    x = var(5, 2, 8, 8, grad=False)
    t = np.array([0, 1, 2, 0, 1])
    with amp.autocast():
        h = net[1](net[0](x))
        loss = F.cross_entropy(net[5](net[4](net[3](net[2](h)))), t)
    assert h.dtype == np.float16            # batch norm keeps the activation dtype
    loss.backward()
    g16 = [p.grad.data.copy() for p in net.parameters()]
    net.zero_grad()
    F.cross_entropy(net(x), t).backward()
    num = sum(((a - p.grad.data) ** 2).sum() for a, p in zip(g16, net.parameters()))
    den = sum((p.grad.data ** 2).sum() for p in net.parameters())
    assert np.sqrt(num / den) < 2e-2


def test_bfloat16_needs_ml_dtypes(ml_dtypes_state):
    x, w = var(2, 3), var(4, 3, seed=1)
    if ml_dtypes_state("bfloat16") == np.float32:          # ml_dtypes missing
        with pytest.raises(ImportError, match=r"pip install -e .\.\[amp\]..*ml_dtypes"):
            amp.autocast("bfloat16")
        return
    with amp.autocast("bf16"):
        y = F.linear(x, w)
    assert y.dtype.name == "bfloat16"
    y.sum().backward()
    assert w.grad.dtype == np.float32
    want = (x.data.astype(y.dtype).astype(np.float32)
            @ w.data.astype(y.dtype).astype(np.float32).T).astype(y.dtype)
    np.testing.assert_array_equal(y.data.astype(np.float32), want.astype(np.float32))


@pytest.mark.parametrize("dtype, error, words", [
    ("float8", ValueError, "dtype must be one of 'float16'"),
    ("float32", ValueError, "dtype must be one of"),
    (np.float32, ValueError, "lower-precision float"),
    (np.int8, ValueError, "lower-precision float"),
    (5, TypeError, "dtype must be a dtype"),
])
def test_unknown_dtypes_are_clear_errors(dtype, error, words):
    with pytest.raises(error, match=words):
        amp.autocast(dtype)


def test_enabled_must_be_a_bool():
    with pytest.raises(TypeError, match="autocast: enabled must be a bool"):
        amp.autocast(enabled="yes")
    with pytest.raises(TypeError, match="autocast: fn must be callable"):
        amp.autocast()(3)


def test_mixed_dtypes_stay_an_error_outside_autocast():
    with pytest.raises(TypeError, match="conv2d: x dtype float16 and weight dtype float32"):
        F.conv2d(var(1, 2, 4, 4).data.astype(np.float16), var(3, 2, 3, 3))


@pytest.mark.gpu
def test_cupy_runs_float16_natively():
    import cupy
    x = lz.Variable(cupy.asarray(var(4, 3).data))
    w = lz.Variable(cupy.asarray(var(5, 3, seed=1).data))
    with amp.autocast():
        y = F.linear(x, w)
        s = F.softmax(y, axis=1)
    assert isinstance(y.data, cupy.ndarray) and y.dtype == np.float16 and s.dtype == np.float32
    s.sum().backward()
    assert w.grad.dtype == np.float32
    with amp.autocast("float16"):
        pass
    pytest.importorskip("ml_dtypes")
    with amp.autocast("bfloat16"), pytest.raises(ValueError, match="CuPy has no bfloat16"):
        F.linear(x, w)


def test_the_graph_is_freed_without_the_cyclic_collector():
    import gc
    import weakref
    lin = nn.Linear(3, 3)
    gc.disable()
    try:
        with amp.autocast():
            y = F.relu(lin(var(2, 3)))
            loss = lz.checkpoint(lambda v: F.tanh(lin(v)), y).sum()
        loss.backward()
        refs = [weakref.ref(y.creator), weakref.ref(loss.creator)]
        del y, loss
        assert all(r() is None for r in refs)
    finally:
        gc.enable()
