"""rrelu: evaluation mode against PyTorch and central differences; training mode's random
slopes (range, gradient, reproducibility, the mode switch); bad arguments."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import lezero as lz
import lezero.functions as F
from lezero import nn
from lezero.testing import check_double_backward, check_gradient, check_torch, rand


def _away_from_zero(x, gap=0.05):
    """``x`` with entries near the kink at 0 moved off it (for central differences)."""
    x[np.abs(x) < gap] = 2 * gap
    return x


@pytest.mark.parametrize("lower,upper", [(1 / 8, 1 / 3), (0.2, 0.2), (-0.5, 0.9)],
                         ids=["default", "fixed", "wide"])
def test_eval_mode_matches_torch(lower, upper):
    x = rand(4, 5, dtype=np.float32, low=-2, high=2, seed=0)
    check_torch(lambda v: F.rrelu(v, lower, upper, training=False),
                lambda t: TF.rrelu(t, lower, upper, training=False), x)


def test_eval_mode_matches_torch_at_zero_and_nan():
    x = np.array([0.0, -1.5, np.nan, 2.0], np.float32)
    v, t = lz.Variable(x.copy()), torch.tensor(x, requires_grad=True)
    y, ty = F.rrelu(v, training=False), TF.rrelu(t, training=False)
    np.testing.assert_allclose(y.data, ty.detach().numpy(), rtol=1e-6)
    (g,) = lz.grad(y, [v], grad_outputs=np.ones_like(x))
    ty.backward(torch.ones_like(t))
    np.testing.assert_allclose(g.data, t.grad.numpy(), rtol=1e-6)


def test_eval_mode_gradients_by_central_differences():
    x = _away_from_zero(rand(3, 4, low=-2, high=2, seed=1))
    fn = lambda v: F.rrelu(v, 0.1, 0.4, training=False)      # noqa: E731
    check_gradient(fn, x)
    check_double_backward(fn, x)


def test_training_slopes_lie_in_range_and_are_the_gradient():
    lower, upper = 0.1, 0.3
    x = rand(50, 40, low=-2, high=2, seed=2)
    x[0, :4] = [0.0, -0.0, 1e-3, -1e-3]
    v = lz.Variable(x)
    y = F.rrelu(v, lower, upper, training=True)
    (g,) = lz.grad(y, [v], grad_outputs=np.ones_like(x))
    pos = x > 0
    np.testing.assert_array_equal(y.data[pos], x[pos])
    np.testing.assert_array_equal(g.data[pos], 1.0)
    slopes = g.data[~pos]
    assert np.all((slopes >= lower) & (slopes <= upper))
    assert slopes.std() > 0.03                         # drawn per element, not one slope
    nonzero = ~pos & (x != 0)
    np.testing.assert_allclose(y.data[nonzero], x[nonzero] * g.data[nonzero], rtol=1e-12)
    # The slope array is a constant: even with create_graph the gradient does not depend
    # on the input (its own gradient is zero).
    (g1,) = lz.grad(F.sum(F.rrelu(v, training=True)), [v], create_graph=True)
    assert not g1.requires_grad


def test_training_is_reproducible_under_manual_seed():
    x = rand(6, 7, dtype=np.float32, low=-2, high=2, seed=3)
    lz.manual_seed(11)
    a = F.rrelu(x, training=True).data
    lz.manual_seed(11)
    b = F.rrelu(x, training=True).data
    c = F.rrelu(x, training=True).data
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert a.dtype == np.float32


def test_training_none_follows_config_train():
    x = rand(5, 6, low=-2, high=-0.5, seed=4)
    expected = x * (1 / 8 + 1 / 3) / 2
    with lz.test_mode():
        np.testing.assert_allclose(F.rrelu(x).data, expected)
    assert not np.allclose(F.rrelu(x).data, expected)      # training is the default


def test_module_follows_train_and_eval():
    layer = nn.RReLU(0.2, 0.6)
    x = rand(4, 5, dtype=np.float32, low=-2, high=-0.5, seed=5)
    layer.eval()
    check_torch(layer, torch.nn.RReLU(0.2, 0.6).eval(), x)
    with lz.using_config("train", True):
        np.testing.assert_allclose(layer(x).data, x * 0.4, rtol=1e-6)
    layer.train()
    with lz.test_mode():
        ratio = layer(x).data / x
    assert np.all((ratio >= 0.2) & (ratio <= 0.6)) and ratio.std() > 0.01
    assert repr(layer) == "RReLU(lower=0.2, upper=0.6)"
    assert "inplace=True" in repr(nn.RReLU(inplace=True))


@pytest.mark.parametrize("call,err,match", [
    (lambda x: F.rrelu(x, 0.5, 0.2), ValueError, r"^rrelu: lower and upper .*lower=0.5"),
    (lambda x: F.rrelu(x, float("nan"), 0.3), ValueError, r"^rrelu: .*finite"),
    (lambda x: F.rrelu(x, 0.1, float("inf")), ValueError, r"^rrelu: .*finite"),
    (lambda x: F.rrelu(x, "0.1"), TypeError, r"^rrelu: lower must be a real number"),
    (lambda x: F.rrelu(x, upper=None), TypeError, r"^rrelu: upper must be a real number"),
    (lambda x: F.rrelu(x, training=1), TypeError, r"^rrelu: training must be a bool"),
    (lambda x: F.rrelu(np.arange(3)), TypeError, r"^rrelu: input must be floating point"),
    (lambda x: nn.RReLU(0.5, 0.2), ValueError, r"^RReLU: lower \(0.5\) must not exceed"),
    (lambda x: nn.RReLU("a"), TypeError, r"^RReLU: lower must be a number"),
])
def test_bad_arguments(call, err, match):
    with pytest.raises(err, match=match):
        call(lz.Variable(np.ones((2, 3), np.float32)))


def test_registered_as_an_activation():
    from lezero.functions import registry
    info = registry.REGISTRY["rrelu"]
    assert info.category == "activation" and info.fn is F.rrelu and info.double_differentiable


def test_on_gpu(xp):
    x = rand(3, 4, dtype=np.float32, low=-2, high=2, seed=6)
    check_torch(lambda v: F.rrelu(v, training=False), lambda t: TF.rrelu(t, training=False),
                x, xp=xp)
    y = F.rrelu(xp.asarray(x), training=True)
    assert isinstance(y.data, xp.ndarray) and y.dtype == np.float32
