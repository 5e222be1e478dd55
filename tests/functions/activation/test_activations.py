"""Activations: central differences, double backward, PyTorch parity, stability, bad inputs."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from scipy.special import erfc

import lezero as lz
import lezero.functions as F
from lezero import kernels
from lezero.functions import registry
from lezero.kernels.gelu import gelu_grad_ref as gelu_grad_array, gelu_ref as gelu_array
from lezero.testing import check_all, check_gradient, check_torch, rand

# (id, LeZero operator, PyTorch operator, input range): ranges cover every piece.
ELEMENTWISE = [
    ("relu", F.relu, TF.relu, 2),
    ("relu6", F.relu6, TF.relu6, 8),
    ("leaky_relu", F.leaky_relu, TF.leaky_relu, 2),
    ("leaky_relu_0.2", lambda x: F.leaky_relu(x, 0.2), lambda x: TF.leaky_relu(x, 0.2), 2),
    ("elu", F.elu, TF.elu, 2),
    ("elu_0.5", lambda x: F.elu(x, alpha=0.5), lambda x: TF.elu(x, alpha=0.5), 2),
    ("selu", F.selu, TF.selu, 2),
    ("celu_2", lambda x: F.celu(x, alpha=2.0), lambda x: TF.celu(x, alpha=2.0), 3),
    ("gelu", F.gelu, TF.gelu, 3),
    ("gelu_tanh", lambda x: F.gelu(x, approximate="tanh"),
     lambda x: TF.gelu(x, approximate="tanh"), 3),
    ("silu", F.silu, TF.silu, 3),
    ("mish", F.mish, TF.mish, 3),
    ("softplus", F.softplus, TF.softplus, 3),
    ("softplus_beta2_thr1", lambda x: F.softplus(x, beta=2, threshold=1),
     lambda x: TF.softplus(x, beta=2, threshold=1), 2),
    ("softsign", F.softsign, TF.softsign, 3),
    ("hardtanh", F.hardtanh, TF.hardtanh, 2),
    ("hardtanh_asym", lambda x: F.hardtanh(x, -0.5, 1.5), lambda x: TF.hardtanh(x, -0.5, 1.5), 2),
    ("hardsigmoid", F.hardsigmoid, TF.hardsigmoid, 4),
    ("hardswish", F.hardswish, TF.hardswish, 4),
    ("sigmoid", F.sigmoid, torch.sigmoid, 4),
    ("logsigmoid", F.logsigmoid, TF.logsigmoid, 4),
    ("tanhshrink", F.tanhshrink, TF.tanhshrink, 3),
]


@pytest.mark.parametrize("name,op,top,r", ELEMENTWISE, ids=[e[0] for e in ELEMENTWISE])
def test_elementwise(name, op, top, r):
    check_all(op, top, rand(3, 4, low=-r, high=r, seed=len(name)))


@pytest.mark.parametrize("name,op,top,r", ELEMENTWISE, ids=[e[0] for e in ELEMENTWISE])
def test_elementwise_float32_in_float32_out(name, op, top, r):
    x = lz.Variable(rand(5, dtype=np.float32, low=-r, high=r, seed=1))
    y = op(x)
    y.backward()
    assert y.dtype == np.float32 and x.grad.dtype == np.float32


@pytest.mark.parametrize("op,top", [(F.sigmoid, torch.sigmoid), (F.logsigmoid, TF.logsigmoid),
                                    (F.softplus, TF.softplus), (F.silu, TF.silu),
                                    (F.mish, TF.mish), (F.gelu, TF.gelu), (F.elu, TF.elu),
                                    (F.softsign, TF.softsign)])
def test_large_magnitudes_stay_finite(op, top):
    x = np.array([-1000.0, -90.0, -30.0, 30.0, 90.0, 1000.0], np.float32)
    check_torch(op, top, x, rtol=1e-5, atol=1e-6)
    v = lz.Variable(x)
    (g,) = lz.grad(op(v), [v], grad_outputs=np.ones_like(x))
    assert np.all(np.isfinite(op(v).data)) and np.all(np.isfinite(g.data))


def test_sigmoid_keeps_relative_precision_far_left():
    # 1 / (1 + e^90) is about 8e-40 (a float32 subnormal); a naive formula gives 0 or NaN.
    y = F.sigmoid(np.array([-90.0], np.float32))
    assert y.data[0] > 0 and np.isclose(y.data[0], np.exp(-90.0), rtol=1e-3)


# ----- GELU: fused Functions, any-order derivatives, Numba kernel vs reference ----------

@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_third_derivative(approximate):
    """d/dx of gelu'' equals central differences of gelu'': the fused backward's backward
    is itself differentiable."""
    def second(x):
        (g1,) = lz.grad(F.gelu(x, approximate=approximate).sum(), [x], create_graph=True)
        (g2,) = lz.grad(g1.sum(), [x], create_graph=True)
        return g2
    check_gradient(second, rand(6, low=-3, high=3, seed=2), rtol=1e-4, atol=1e-5)


def test_gelu_second_derivative_value():
    # gelu''(x) = phi(x) (2 - x^2): at 0 that is 2 / sqrt(2 pi).
    x = lz.Variable(np.zeros(1))
    (g1,) = lz.grad(F.gelu(x).sum(), [x], create_graph=True)
    (g2,) = lz.grad(g1.sum(), [x])
    np.testing.assert_allclose(g2.data, [2 / np.sqrt(2 * np.pi)], rtol=1e-12)


@pytest.mark.skipif(not kernels.numba_available(), reason="numba not installed")
def test_gelu_numba_kernel_matches_numpy_reference():
    from lezero.kernels.gelu import gelu_grad_numba as gelu_backward, gelu_numba as gelu_forward
    x = np.concatenate([rand(997, dtype=np.float32, low=-8, high=8, seed=3),
                        np.array([0, -0.0, 1e-30, -12, 12, 40, np.inf], np.float32)])
    gy = rand(x.size, dtype=np.float32, seed=4)
    y, ref = gelu_forward(x), gelu_array(x, "none")
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, ref, rtol=2e-6, atol=5e-7)
    # Very negative inputs, where GELU is tiny: the kernel works from the tail P(N > |x|),
    # so it stays close to the float64 truth in relative terms (1 + erf(x) cancels to 0).
    far = np.array([-4.0, -5.0, -6.0], np.float32)
    truth = far * 0.5 * erfc(-far.astype(np.float64) / np.sqrt(2))
    np.testing.assert_allclose(gelu_forward(far), truth, rtol=5e-3)
    np.testing.assert_allclose(gelu_backward(x[:-1], gy[:-1]),
                               gelu_grad_array(x[:-1], gy[:-1], "none"), rtol=2e-6, atol=5e-7)
    # Non-contiguous and multi-dimensional inputs take the same path.
    x2 = rand(4, 6, dtype=np.float32, low=-3, high=3, seed=5)[:, ::2]
    np.testing.assert_allclose(gelu_forward(x2), gelu_array(x2, "none"), rtol=2e-6, atol=5e-7)


@pytest.mark.skipif(not kernels.numba_available(), reason="numba not installed")
def test_gelu_numba_kernel_far_tail_and_specials():
    """The density's exponential is floored at e^-87 (|x| > 13): GELU there is 0 (the
    truth is below 1e-38); down to it the tail keeps its relative accuracy."""
    from lezero.kernels.gelu import gelu_grad_numba, gelu_numba
    far = np.array([-9.0, -13.0], np.float32)
    truth = far * 0.5 * erfc(-far.astype(np.float64) / np.sqrt(2))
    np.testing.assert_allclose(gelu_numba(far), truth, rtol=5e-2)
    x = np.array([-13.5, -20.0, 20.0, np.nan, np.inf], np.float32)
    y = gelu_numba(x)
    np.testing.assert_array_equal(y[:3], [0.0, 0.0, 20.0])
    assert np.isnan(y[3]) and y[4] == np.inf
    g = gelu_grad_numba(x, np.ones_like(x))
    np.testing.assert_array_equal(g[:3], [0.0, 0.0, 1.0])
    assert np.isnan(g[3])


@pytest.mark.skipif(not kernels.numba_available(), reason="numba not installed")
def test_gelu_tanh_numba_kernel_matches_float64_truth_and_torch():
    from lezero.kernels.gelu import gelu_grad_numba as gelu_backward, gelu_numba as gelu_forward
    x = np.concatenate([rand(997, dtype=np.float32, low=-8, high=8, seed=13),
                        np.array([0, -0.0, 1e-30, -12, 12, 40, -40, np.inf], np.float32)])
    gy = rand(x.size, dtype=np.float32, seed=14)
    x64 = x.astype(np.float64)
    truth = gelu_array(x64, "tanh")
    y = gelu_forward(x, "tanh")
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, truth, rtol=2e-6, atol=5e-7)
    # x * sigmoid(2u) has no cancellation where GELU is tiny: relative accuracy holds
    far = np.array([-4.0, -5.0, -6.0], np.float32)
    np.testing.assert_allclose(gelu_forward(far, "tanh"), gelu_array(far.astype(np.float64),
                                                                     "tanh"), rtol=1e-5)
    np.testing.assert_allclose(gelu_backward(x[:-1], gy[:-1], "tanh"),
                               gelu_grad_array(x64[:-1], gy[:-1].astype(np.float64), "tanh"),
                               rtol=2e-6, atol=5e-7)
    t = torch.from_numpy(x[:-1].copy()).requires_grad_()
    TF.gelu(t, approximate="tanh").backward(torch.from_numpy(gy[:-1]))
    np.testing.assert_allclose(F.gelu(x[:-1], approximate="tanh").data,
                               TF.gelu(t, approximate="tanh").detach().numpy(), rtol=2e-6,
                               atol=5e-7)
    np.testing.assert_allclose(gelu_backward(x[:-1], gy[:-1], "tanh"), t.grad.numpy(),
                               rtol=5e-6, atol=1e-6)
    assert np.isnan(gelu_forward(np.array([np.nan], np.float32), "tanh")[0])


def test_gelu_paths_agree_and_match_torch_with_numba_off():
    x = rand(4, 5, dtype=np.float32, low=-4, high=4, seed=6)
    with lz.using_config("use_numba", False):
        check_torch(F.gelu, TF.gelu, x)
        ref = F.gelu(x).data
    np.testing.assert_allclose(F.gelu(x).data, ref, rtol=2e-6, atol=5e-7)


# ----- prelu, glu -------------------------------------------------------------------------

@pytest.mark.parametrize("xshape,wshape", [((2, 3, 4), (3,)), ((2, 3), (1,)), ((5,), (1,)),
                                           ((2, 3, 2, 2), (3,)), ((2, 3), ())])
def test_prelu(xshape, wshape):
    x = rand(*xshape, seed=7)
    w = rand(*wshape, seed=8, low=0.1, high=0.5)
    check_all(F.prelu, TF.prelu, x, w)


@pytest.mark.parametrize("shape,axis", [((2, 6), -1), ((4, 3), 0), ((2, 4, 3), 1)])
def test_glu(shape, axis):
    check_all(lambda x: F.glu(x, axis), lambda x: TF.glu(x, axis), rand(*shape, seed=9))


# ----- softmax family ---------------------------------------------------------------------

@pytest.mark.parametrize("shape,axis", [((3, 4), -1), ((3, 4), 0), ((2, 3, 4), 1), ((5,), 0)])
@pytest.mark.parametrize("op,top", [(F.softmax, torch.softmax), (F.log_softmax, torch.log_softmax)],
                         ids=["softmax", "log_softmax"])
def test_softmax_family(op, top, shape, axis):
    check_all(lambda x: op(x, axis), lambda x: top(x, axis), rand(*shape, seed=10, low=-3, high=3))


@pytest.mark.parametrize("op,top", [(F.softmax, torch.softmax), (F.log_softmax, torch.log_softmax)])
def test_softmax_family_is_stable_at_magnitude_1000(op, top):
    x = np.array([[1000.0, 999.0, -1000.0], [-1000.0, -1001.0, -999.0]], np.float32)
    check_torch(lambda v: op(v, -1), lambda t: top(t, -1), x)
    v = lz.Variable(x)
    y = op(v, -1)
    (g,) = lz.grad(y, [v], grad_outputs=rand(2, 3, dtype=np.float32, seed=11))
    assert np.all(np.isfinite(y.data)) and np.all(np.isfinite(g.data))


def test_softmax_rows_sum_to_one():
    y = F.softmax(rand(4, 7, seed=12) * 50, axis=1)
    np.testing.assert_allclose(y.data.sum(axis=1), np.ones(4), rtol=1e-12)


# ----- gumbel_softmax ---------------------------------------------------------------------

def _seeded_gumbel(seed, **kw):
    def f(logits):
        lz.manual_seed(seed)
        return F.gumbel_softmax(logits, **kw)
    return f


def _noise(seed, shape, axis, dtype=np.float32):
    """The Gumbel noise gumbel_softmax draws after manual_seed(seed), recovered from a
    sample at zero logits: softmax(noise) determines noise up to a per-row constant, which
    softmax ignores."""
    return np.log(_seeded_gumbel(seed, axis=axis)(np.zeros(shape, dtype)).data)


@pytest.mark.parametrize("tau,axis", [(1.0, -1), (0.5, 0)])
def test_gumbel_softmax_gradients_and_torch_with_the_same_noise(tau, axis):
    logits = rand(3, 4, seed=13)
    f = _seeded_gumbel(5, tau=tau, axis=axis)
    noise = _noise(5, (3, 4), axis)
    top = lambda t: torch.softmax((t + torch.tensor(noise)) / tau, axis)   # noqa: E731
    check_all(f, top, logits)


def test_gumbel_softmax_is_reproducible_and_random():
    logits = rand(2, 5, dtype=np.float32, seed=14)
    a, b = _seeded_gumbel(1)(logits).data, _seeded_gumbel(1)(logits).data
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, F.gumbel_softmax(logits).data)
    np.testing.assert_allclose(a.sum(axis=-1), 1, rtol=1e-6)
    assert a.dtype == np.float32 and np.all(a > 0)


def test_gumbel_max_frequencies_follow_softmax():
    """The Gumbel-max trick: argmax(logits + noise) is distributed as softmax(logits)."""
    logits = np.log(np.array([0.6, 0.3, 0.1], np.float32))
    y = F.gumbel_softmax(np.broadcast_to(logits, (20000, 3)).copy(), hard=True).data
    assert set(np.unique(y)) == {0.0, 1.0} and np.all(y.sum(axis=1) == 1)
    np.testing.assert_allclose(y.mean(axis=0), [0.6, 0.3, 0.1], atol=0.015)


def test_gumbel_softmax_temperature():
    """Small tau gives nearly one-hot samples, large tau nearly uniform ones (4 classes)."""
    def mean_max(tau):
        return F.gumbel_softmax(np.zeros((2000, 4), np.float32), tau=tau).data.max(axis=1).mean()
    assert mean_max(0.05) > 0.95
    assert 0.5 < mean_max(1.0) < 0.7
    assert mean_max(50.0) < 0.3


def test_gumbel_softmax_hard_is_straight_through():
    logits = rand(3, 4, seed=15)
    gy = rand(3, 4, seed=16)
    x_hard, x_soft = lz.Variable(logits), lz.Variable(logits)
    y_hard = _seeded_gumbel(7, hard=True, tau=0.7)(x_hard)
    y_soft = _seeded_gumbel(7, tau=0.7)(x_soft)
    # Value: the one-hot of the soft sample's argmax, exactly.
    expected = np.eye(4)[y_soft.data.argmax(axis=1)]
    np.testing.assert_array_equal(y_hard.data, expected)
    # Gradient: exactly the soft sample's.
    (g_hard,) = lz.grad(y_hard, [x_hard], grad_outputs=gy)
    (g_soft,) = lz.grad(y_soft, [x_soft], grad_outputs=gy)
    np.testing.assert_allclose(g_hard.data, g_soft.data, rtol=1e-12)
    assert np.abs(g_hard.data).max() > 1e-3


# ----- methods and bad inputs -----------------------------------------------------------

def test_variable_methods():
    x = lz.Variable(rand(2, 3, dtype=np.float32, seed=17))
    np.testing.assert_array_equal(x.relu().data, F.relu(x).data)
    np.testing.assert_array_equal(x.sigmoid().data, F.sigmoid(x).data)
    np.testing.assert_array_equal(x.softmax(0).data, F.softmax(x, 0).data)
    np.testing.assert_array_equal(x.log_softmax().data, F.log_softmax(x).data)


@pytest.mark.parametrize("call,err,match", [
    (lambda x: F.relu(np.arange(3)), TypeError, r"relu: input must be floating point.*int"),
    (lambda x: F.sigmoid([1.0, 2.0]), TypeError, r"sigmoid: input must be a Variable.*list"),
    (lambda x: F.leaky_relu(x, "0.1"), TypeError, r"leaky_relu: negative_slope.*str"),
    (lambda x: F.elu(x, alpha=None), TypeError, r"elu: alpha.*NoneType"),
    (lambda x: F.hardtanh(x, 1.0, -1.0), ValueError, r"hardtanh: min_val \(1.0\).*max_val"),
    (lambda x: F.celu(x, alpha=0), ValueError, r"celu: alpha must not be 0"),
    (lambda x: F.softplus(x, beta=0), ValueError, r"softplus: beta"),
    (lambda x: F.gelu(x, approximate="erf"), ValueError, r"gelu: approximate.*'erf'"),
    (lambda x: F.softmax(x, axis=2), ValueError, r"softmax: axis 2 is out of range"),
    (lambda x: F.log_softmax(np.ones((), np.float32)), ValueError,
     r"log_softmax: input must have at least 1 dim"),
    (lambda x: F.glu(x), ValueError, r"glu: the size of axis -1 must be even.*got 3"),
    (lambda x: F.prelu(x, np.ones(2, np.float32)), ValueError,
     r"prelu: weight .* 1 or 3 \(channels\).*got shape \(2,\)"),
    (lambda x: F.prelu(x, np.ones((2, 1), np.float32)), ValueError, r"prelu: weight"),
    (lambda x: F.prelu(x, np.ones(1)), TypeError, r"prelu: weight dtype float64"),
    (lambda x: F.gumbel_softmax(x, tau=0), ValueError, r"gumbel_softmax: tau must be positive"),
    (lambda x: F.gumbel_softmax(x, hard=1), TypeError, r"gumbel_softmax: hard must be a bool"),
])
def test_bad_inputs(call, err, match):
    x = lz.Variable(np.ones((2, 3), np.float32))
    with pytest.raises(err, match=match):
        call(x)


@pytest.mark.parametrize("name", sorted(op.name for op in registry.operators("activation")))
def test_every_activation_rejects_integer_input_by_name(name):
    # the required arguments after the input (prelu's weight, threshold's two numbers)
    extra = {"prelu": (np.ones(1, np.float32),), "threshold": (0.0, 0.0)}.get(name, ())
    arg = "logits" if name == "gumbel_softmax" else "input"      # the parameter's name
    with pytest.raises(TypeError, match=rf"^{name}: {arg} must be floating point, got dtype int"):
        getattr(F, name)(np.arange(6).reshape(2, 3), *extra)


def test_prelu_rejects_bad_weight_shape_for_channels():
    with pytest.raises(ValueError, match=r"prelu: weight .* 1 or 3"):
        F.prelu(np.ones((2, 3, 4), np.float32), np.ones(4, np.float32))


def test_activations_on_gpu(xp):
    x = rand(3, 4, dtype=np.float32, low=-3, high=3, seed=18)
    for op, top in [(F.gelu, TF.gelu), (F.silu, TF.silu), (F.relu, TF.relu),
                    (F.sigmoid, torch.sigmoid), (F.softplus, TF.softplus),
                    (lambda v: F.gelu(v, approximate="tanh"),
                     lambda t: TF.gelu(t, approximate="tanh")),
                    (lambda v: F.log_softmax(v, 1), lambda t: torch.log_softmax(t, 1))]:
        check_torch(op, top, x, xp=xp)


def test_relu_first_order_array_equals_the_recorded_backward():
    """Plain backward takes relu's gradient from the kernel as an array; create_graph
    records ReLUGrad instead (so it can be differentiated again); both agree, NaN and the
    kink included."""
    data = np.random.default_rng(0).standard_normal((4, 5)).astype(np.float32)
    data.reshape(-1)[:3] = (0.0, np.nan, -0.0)
    gy = np.random.default_rng(1).standard_normal(data.shape).astype(np.float32)
    grads = []
    for create_graph in (False, True):
        x = lz.Variable(data)
        F.relu(x).backward(grad=lz.Variable(gy), create_graph=create_graph)
        assert (x.grad.creator is not None) == create_graph
        grads.append(x.grad.data)
    np.testing.assert_array_equal(grads[0], grads[1])
    np.testing.assert_array_equal(grads[0], np.where(data > 0, gy, 0))
