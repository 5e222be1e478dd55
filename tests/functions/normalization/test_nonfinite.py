"""Normalization on NaN, inf and constant rows, and interpolate's sizes (issue 32).

``F.layer_norm`` / ``nn.LayerNorm`` / ``F.rms_norm`` raised ``ZeroDivisionError`` from the
Numba kernel on a NaN or inf row and on a constant row with eps=0.  NaN and inf now
propagate as in PyTorch: every test here runs the same input through torch and compares
the forward values and the backward gradients, NaN positions included.  The other
normalizations (group, instance, batch, normalize) are held to the same, and
``interpolate`` to clear errors for sizes and scale factors that are not finite, not
positive or too large.
"""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import lezero as lz
import lezero.functions as F
from lezero import nn
from lezero.functions.pooling import resize

ROWS = np.array([[1.0, np.nan, 3.0, 4.0],       # a NaN row
                 [5.0, 5.0, 5.0, 5.0],          # a constant row
                 [np.inf, 1.0, 2.0, 3.0],       # an inf row
                 [-np.inf, np.inf, 0.0, 1.0],
                 [1.0, 2.0, 3.0, 4.0],          # an ordinary row
                 [0.0, 0.0, 0.0, 0.0]], np.float32)


def same(ours, theirs, what):
    """Equal values where finite, NaN and inf at the same places."""
    theirs = theirs.detach().numpy() if isinstance(theirs, torch.Tensor) else theirs
    ours = ours.data if isinstance(ours, lz.Variable) else ours
    np.testing.assert_array_equal(np.isnan(ours), np.isnan(theirs), err_msg=f"{what}: NaN")
    np.testing.assert_allclose(ours, theirs, rtol=2e-5, atol=1e-4, equal_nan=True,
                               err_msg=what)


def both(lz_fn, torch_fn, x, params=()):
    """Forward and backward (upstream ones) of both frameworks on ``x`` and ``params``."""
    xs = [lz.Variable(x.copy())] + [lz.Parameter(p.copy()) for p in params]
    ts = [torch.tensor(a, requires_grad=True) for a in (x, *params)]
    y = lz_fn(*xs)
    y.backward()
    ty = torch_fn(*ts)
    ty.backward(torch.ones_like(ty))
    same(y, ty, "forward")
    for i, (a, t) in enumerate(zip(xs, ts)):
        same(a.grad.data, t.grad, f"gradient of input {i}")


@pytest.mark.parametrize("use_numba", [True, False], ids=["kernel", "arrays"])
@pytest.mark.parametrize("eps", [1e-5, 0.0])
def test_layer_norm_propagates_nan_and_inf_as_torch(use_numba, eps):
    w = np.linspace(0.5, 2.0, 4).astype(np.float32)
    b = np.linspace(-1.0, 1.0, 4).astype(np.float32)
    with lz.using_config("use_numba", use_numba):
        both(lambda x, w, b: F.layer_norm(x, (4,), w, b, eps=eps),
             lambda x, w, b: TF.layer_norm(x, (4,), w, b, eps=eps), ROWS, (w, b))
        both(lambda x: F.layer_norm(x, (4,), eps=eps),
             lambda x: TF.layer_norm(x, (4,), eps=eps), ROWS)


@pytest.mark.parametrize("use_numba", [True, False], ids=["kernel", "arrays"])
@pytest.mark.parametrize("eps", [None, 0.0])
def test_rms_norm_propagates_nan_and_inf_as_torch(use_numba, eps):
    w = np.linspace(0.5, 2.0, 4).astype(np.float32)
    with lz.using_config("use_numba", use_numba):
        both(lambda x, w: F.rms_norm(x, (4,), w, eps=eps),
             lambda x, w: TF.rms_norm(x, (4,), w, eps=eps), ROWS, (w,))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_layer_norm_module_on_a_nan_row_float64_too(dtype):
    m = nn.LayerNorm(4, eps=0.0)
    if dtype == np.float64:
        m.double()
    x = ROWS.astype(dtype)
    y = m(lz.Variable(x))
    ty = TF.layer_norm(torch.tensor(x), (4,), eps=0.0)
    same(y, ty, "LayerNorm")
    assert np.isfinite(y.data[4]).all()                 # the ordinary row is untouched


def test_layer_norm_over_empty_trailing_dims_is_empty_as_torch():
    for fn in (lambda x: F.layer_norm(x, (0,)), lambda x: F.rms_norm(x, (0,))):
        for use_numba in (True, False):
            with lz.using_config("use_numba", use_numba):
                x = lz.Variable(np.zeros((3, 0), np.float32))
                y = fn(x)
                y.backward()
                assert y.shape == (3, 0) and x.grad.shape == (3, 0)


def test_group_norm_propagates_like_torch():
    x = ROWS.reshape(3, 2, 4)
    for eps in (1e-5, 0.0):
        both(lambda x: F.group_norm(x, 2, eps=eps), lambda x: TF.group_norm(x, 2, eps=eps), x)
        both(lambda x: F.group_norm(x, 1, eps=eps), lambda x: TF.group_norm(x, 1, eps=eps), x)


def test_instance_norm_propagates_and_a_constant_row_with_eps_0_gives_0_as_torch():
    x = ROWS.reshape(3, 2, 4)
    for eps in (1e-5, 0.0):
        both(lambda x: F.instance_norm(x, eps=eps), lambda x: TF.instance_norm(x, eps=eps), x)
    y = F.instance_norm(lz.Variable(ROWS[[1, 4]].reshape(1, 2, 4)), eps=0.0)
    np.testing.assert_array_equal(y.data[0, 0], 0.0)    # PyTorch: rstd 0 for var == 0


def test_instance_norm_second_order_keeps_the_zero_variance_rule():
    x = lz.Variable(ROWS[[1, 4]].reshape(1, 2, 4).astype(np.float64))
    y = F.instance_norm(x, eps=0.0)
    (gx,) = lz.grad([(y * y * y).sum()], [x], create_graph=True)
    assert np.isfinite(gx.data).all()
    np.testing.assert_array_equal(gx.data[0, 0], 0.0)


def test_batch_norm_propagates_and_refuses_eps_0_when_training_as_torch():
    x = np.array([[np.nan, 1.0], [1.0, 2.0], [np.inf, 1.0], [2.0, 4.0]], np.float32)
    both(lambda x: F.batch_norm(x, None, None, training=True),
         lambda x: TF.batch_norm(x, None, None, training=True), x)
    rm, rv = np.zeros(2, np.float32), np.ones(2, np.float32)
    trm, trv = torch.zeros(2), torch.ones(2)
    F.batch_norm(lz.Variable(x), rm, rv, training=True)
    TF.batch_norm(torch.tensor(x), trm, trv, training=True)
    same(rm, trm, "running_mean")
    same(rv, trv, "running_var")
    with pytest.raises(ValueError, match="batch_norm: eps must be positive when training"):
        F.batch_norm(lz.Variable(x), None, None, training=True, eps=0.0)
    zero = np.zeros(2, np.float32)
    both(lambda x: F.batch_norm(x, zero, zero, training=False, eps=0.0),
         lambda x: TF.batch_norm(x, torch.zeros(2), torch.zeros(2), training=False, eps=0.0),
         x)


@pytest.mark.parametrize("eps", [1e-12, 0.0])
def test_normalize_propagates_like_torch(eps):
    both(lambda x: F.normalize(x, axis=1, eps=eps),
         lambda x: TF.normalize(x, dim=1, eps=eps), ROWS[[0, 2, 4]])
    y = F.normalize(lz.Variable(ROWS[[5]]), axis=1, eps=eps)
    same(y, TF.normalize(torch.tensor(ROWS[[5]]), dim=1, eps=eps), "zero row")


# ----- interpolate --------------------------------------------------------------------------
X = lz.Variable(np.ones((1, 2, 4, 4), np.float32))


@pytest.mark.parametrize("kwargs,exc,match", [
    (dict(scale_factor=float("nan")), ValueError,
     "scale_factor must be positive and finite, got nan"),
    (dict(scale_factor=float("inf")), ValueError, "scale_factor must be positive and finite"),
    (dict(scale_factor=(2.0, float("-inf"))), ValueError, "scale_factor must be positive"),
    (dict(scale_factor=0), ValueError, "scale_factor must be positive and finite, got 0"),
    (dict(scale_factor=-1.5), ValueError, "scale_factor must be positive"),
    (dict(scale_factor=0.1), ValueError, r"output size \(0, 0\) must be positive"),
    (dict(scale_factor=1e9), ValueError,
     "scale_factor 1000000000.0 makes an output larger than MAX_OUTPUT_ELEMENTS"),
    (dict(scale_factor=1e300), ValueError, r"scale_factor 1e\+300 makes an output larger than"),
    (dict(scale_factor=(30000.0, 30000.0)), ValueError,
     r"the output would have 28800000000 elements \(shape \(1, 2, 120000, 120000\)\)"),
    (dict(size=(100000, 100000)), ValueError, "the output would have 20000000000 elements"),
    (dict(scale_factor=(2.0,)), ValueError,
     r"scale_factor must give one value per spatial dim \(2\), got \(2.0,\)"),
    (dict(scale_factor=(2.0, 2.0, 2.0)), ValueError, "scale_factor must give one value per"),
    (dict(size=(3,)), ValueError, r"size must give one value per spatial dim \(2\)"),
    (dict(size=(3, 4, 5)), ValueError, "size must give one value per spatial dim"),
    (dict(size=0), ValueError, "size must be positive, got 0"),
    (dict(size=(3, -1)), ValueError, r"size must be positive, got \(3, -1\)"),
    (dict(size=2.5), TypeError, "size must be an int or a sequence of 2, got 2.5"),
    (dict(size=(2, 3.0)), TypeError, "size must be an int or a sequence of 2"),
    (dict(size=True), TypeError, "size must be an int"),
    (dict(scale_factor="2"), TypeError, "scale_factor must be a number or a sequence of 2"),
    (dict(scale_factor=True), TypeError, "scale_factor must be a number"),
    (dict(size=3, scale_factor=2.0), ValueError, "give exactly one of size and scale_factor"),
    (dict(), ValueError, "give exactly one of size and scale_factor"),
    (dict(scale_factor=2.0, recompute_scale_factor="yes"), TypeError,
     "recompute_scale_factor must be None or a bool"),
])
def test_interpolate_names_itself_and_the_argument(kwargs, exc, match):
    with pytest.raises(exc, match="^interpolate: " + match):
        F.interpolate(X, **kwargs)


def test_interpolate_limit_is_a_setting_and_good_sizes_still_work(monkeypatch):
    assert F.interpolate(X, scale_factor=2.5).shape == (1, 2, 10, 10)
    assert F.interpolate(X, size=(3, 5), mode="bilinear").shape == (1, 2, 3, 5)
    assert F.interpolate(X, scale_factor=(0.5, 1.5), recompute_scale_factor=True).shape == \
        (1, 2, 2, 6)
    monkeypatch.setattr(resize, "MAX_OUTPUT_ELEMENTS", 100)
    with pytest.raises(ValueError, match="the output would have 200 elements"):
        F.interpolate(X, size=(10, 10))
    assert F.interpolate(X, size=(7, 7)).shape == (1, 2, 7, 7)


def test_local_response_norm_with_a_huge_window_pads_only_the_channels():
    """A window of 10**9 channels used to pad 10**9 channels; it sums the same as one
    twice the channel count (the alpha / size scale still uses the given size)."""
    x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    x[0, 1, 2] = np.nan
    y = F.local_response_norm(lz.Variable(x), 10**9, alpha=1e6, k=2.0)
    same(y, TF.local_response_norm(torch.tensor(x), 7, alpha=1e6 * 7 / 10**9, k=2.0), "lrn")
