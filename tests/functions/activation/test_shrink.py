"""hardshrink, softshrink, threshold: central differences, double backward, PyTorch parity,
kinks and NaN as PyTorch, bad inputs."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import lezero as lz
import lezero.functions as F
from lezero.testing import check_all, check_torch, rand

# (id, LeZero operator, PyTorch operator): inputs in [-2, 2] cover every piece.
CASES = [
    ("hardshrink", F.hardshrink, TF.hardshrink),
    ("hardshrink_1.2", lambda x: F.hardshrink(x, 1.2), lambda x: TF.hardshrink(x, 1.2)),
    ("hardshrink_0", lambda x: F.hardshrink(x, lambd=0), lambda x: TF.hardshrink(x, 0.0)),
    ("softshrink", F.softshrink, TF.softshrink),
    ("softshrink_1.2", lambda x: F.softshrink(x, lambd=1.2), lambda x: TF.softshrink(x, 1.2)),
    ("softshrink_0", lambda x: F.softshrink(x, 0), lambda x: TF.softshrink(x, 0.0)),
    ("threshold", lambda x: F.threshold(x, 0.3, -1.5), lambda x: TF.threshold(x, 0.3, -1.5)),
    ("threshold_kw", lambda x: F.threshold(x, threshold=-0.5, value=2),
     lambda x: TF.threshold(x, threshold=-0.5, value=2.0)),
]
IDS = [c[0] for c in CASES]


def _away_from_kinks(x, kinks, gap=0.05):
    """``x`` with entries within ``gap`` of a kink moved off it (central differences
    straddling a jump would be meaningless)."""
    for k in kinks:
        near = np.abs(x - k) < gap
        x[near] = k + 2 * gap
    return x


@pytest.mark.parametrize("name,op,top", CASES, ids=IDS)
def test_gradients_double_backward_and_torch(name, op, top):
    x = _away_from_kinks(rand(4, 5, low=-2, high=2, seed=len(name)),
                         [-1.2, -0.5, 0.0, 0.3, 0.5, 1.2, -0.5])
    check_all(op, top, x)


@pytest.mark.parametrize("name,op,top", CASES, ids=IDS)
def test_float32_in_float32_out(name, op, top):
    x = lz.Variable(rand(2, 3, dtype=np.float32, low=-2, high=2, seed=1))
    y = op(x)
    y.backward(grad=np.ones((2, 3), np.float32))
    assert y.dtype == np.float32 and x.grad.dtype == np.float32


def test_kinks_and_nan_follow_torch():
    # Inputs exactly at +-lambd and at the threshold are replaced and get zero gradient;
    # NaN stays NaN and passes its gradient, as in PyTorch.
    x = np.array([np.nan, -0.5, 0.5, -0.25, 0.0, 0.75, -3.0, 0.3], np.float32)
    for op, top in [(F.hardshrink, TF.hardshrink), (F.softshrink, TF.softshrink),
                    (lambda v: F.threshold(v, 0.3, 7.0), lambda t: TF.threshold(t, 0.3, 7.0))]:
        v, t = lz.Variable(x.copy()), torch.tensor(x, requires_grad=True)
        y, ty = op(v), top(t)
        np.testing.assert_array_equal(y.data, ty.detach().numpy())
        (g,) = lz.grad(y, [v], grad_outputs=np.ones_like(x))
        ty.backward(torch.ones_like(t))
        np.testing.assert_array_equal(g.data, t.grad.numpy())


def test_softshrink_keeps_the_sign_of_zero_as_torch():
    x = np.array([-0.25, 0.25], np.float32)
    y = F.softshrink(x).data
    assert np.array_equal(np.signbit(y), np.signbit(TF.softshrink(torch.tensor(x)).numpy()))


def test_negative_lambd_makes_hardshrink_the_identity():
    x = rand(3, 4, dtype=np.float32, seed=2)
    check_torch(lambda v: F.hardshrink(v, -1.0), lambda t: TF.hardshrink(t, -1.0), x)
    np.testing.assert_array_equal(F.hardshrink(x, -1.0).data, x)


def test_threshold_value_does_not_promote_float32():
    y = F.threshold(np.array([0.0, 2.0], np.float32), 1, 1e10)
    assert y.dtype == np.float32 and y.data[0] == np.float32(1e10)


def test_arrays_are_constants():
    y = F.softshrink(rand(3, dtype=np.float32, seed=3))
    assert not y.requires_grad


@pytest.mark.parametrize("call,err,match", [
    (lambda x: F.hardshrink(np.arange(3)), TypeError,
     r"^hardshrink: input must be floating point, got dtype int"),
    (lambda x: F.softshrink([1.0, 2.0]), TypeError, r"softshrink: input must be a Variable.*list"),
    (lambda x: F.hardshrink(x, "0.5"), TypeError, r"hardshrink: lambd must be a real number.*str"),
    (lambda x: F.softshrink(x, lambd=None), TypeError, r"softshrink: lambd .*NoneType"),
    (lambda x: F.softshrink(x, True), TypeError, r"softshrink: lambd .*bool"),
    (lambda x: F.softshrink(x, -0.1), ValueError, r"softshrink: lambd must be non-negative"),
    (lambda x: F.softshrink(x, float("nan")), ValueError, r"softshrink: lambd .*nan"),
    (lambda x: F.threshold(x, "1", 0.0), TypeError, r"threshold: threshold must be a real"),
    (lambda x: F.threshold(x, 0.5, [0.0]), TypeError, r"threshold: value must be a real .*list"),
    (lambda x: F.threshold(np.ones(3, np.int32), 0.5, 0.0), TypeError,
     r"^threshold: input must be floating point"),
])
def test_bad_inputs(call, err, match):
    x = lz.Variable(np.ones((2, 3), np.float32))
    with pytest.raises(err, match=match):
        call(x)


def test_registered_as_activations():
    from lezero.functions import registry
    for name in ("hardshrink", "softshrink", "threshold"):
        info = registry.REGISTRY[name]
        assert info.category == "activation" and info.fn is getattr(F, name)
        assert info.double_differentiable


def test_on_gpu(xp):
    x = rand(3, 4, dtype=np.float32, low=-2, high=2, seed=4)
    for _, op, top in CASES:
        check_torch(op, top, x, xp=xp)
