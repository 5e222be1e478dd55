"""grid_sample: every mode x padding_mode x align_corners against PyTorch (forward and the
gradients of input and grid), central differences and double backward (bilinear), and
bad input."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import lezero as lz
import lezero.functions as F
from lezero.testing import check_double_backward, check_gradient, check_torch, rand

PADDINGS = ["zeros", "border", "reflection"]


def _case(seed, spread=1.4):
    # the grid reaches outside [-1, 1] so that every padding rule is exercised
    return rand(2, 3, 4, 5, seed=seed), rand(2, 3, 4, 2, seed=seed + 1, low=-spread, high=spread)


@pytest.mark.parametrize("padding_mode", PADDINGS)
@pytest.mark.parametrize("align_corners", [False, True])
def test_bilinear_matches_torch(padding_mode, align_corners):
    kw = dict(mode="bilinear", padding_mode=padding_mode, align_corners=align_corners)
    x, g = _case(0)
    check_torch(lambda a, b: F.grid_sample(a, b, **kw), lambda a, b: TF.grid_sample(a, b, **kw),
                x.astype(np.float32), g.astype(np.float32))


@pytest.mark.parametrize("padding_mode", PADDINGS)
@pytest.mark.parametrize("align_corners", [False, True])
def test_bilinear_gradients_and_double_backward(padding_mode, align_corners):
    kw = dict(mode="bilinear", padding_mode=padding_mode, align_corners=align_corners)
    x, g = rand(1, 2, 3, 4, seed=2), rand(1, 2, 3, 2, seed=3, low=-1.4, high=1.4)
    check_gradient(lambda a, b: F.grid_sample(a, b, **kw), x, g)
    check_double_backward(lambda a, b: F.grid_sample(a, b, **kw), x, g)


@pytest.mark.parametrize("padding_mode", PADDINGS)
@pytest.mark.parametrize("align_corners", [False, True])
def test_nearest_matches_torch(padding_mode, align_corners):
    kw = dict(mode="nearest", padding_mode=padding_mode, align_corners=align_corners)
    x, g = _case(4)
    g32 = g.astype(np.float32)
    # nearest has a zero gradient in the grid (PyTorch returns zeros): the grid is a constant
    check_torch(lambda a: F.grid_sample(a, g32, **kw),
                lambda a: TF.grid_sample(a, torch.tensor(g32), **kw), x.astype(np.float32))
    check_gradient(lambda a: F.grid_sample(a, g[:1], **kw), x[:1])
    check_double_backward(lambda a: F.grid_sample(a, g[:1], **kw) ** 2, x[:1])


def test_nearest_rounds_half_to_even_like_torch():
    # with align_corners=True and 5 pixels, g = -0.75, -0.25, 0.25, 0.75 land on 0.5 ... 3.5
    x = np.arange(5.0, dtype=np.float32).reshape(1, 1, 1, 5)
    g = np.array([-0.75, -0.25, 0.25, 0.75], np.float32)
    grid = np.stack([g, np.zeros_like(g)], -1).reshape(1, 1, 4, 2)
    kw = dict(mode="nearest", align_corners=True)
    got = F.grid_sample(x, grid, **kw).data
    ref = TF.grid_sample(torch.tensor(x), torch.tensor(grid), **kw).numpy()
    np.testing.assert_array_equal(got, ref)
    np.testing.assert_array_equal(got.ravel(), [0, 2, 2, 4])


def test_identity_grid_returns_the_input():
    x = rand(1, 2, 3, 4, seed=5, dtype=np.float32)
    theta = torch.tensor([[[1.0, 0, 0], [0, 1.0, 0]]])
    grid = TF.affine_grid(theta, (1, 2, 3, 4), align_corners=False).numpy()
    y = F.grid_sample(x, grid)
    np.testing.assert_allclose(y.data, x, atol=1e-6)
    assert y.dtype == np.float32 and y.shape == (1, 2, 3, 4)


def test_a_point_outside_reads_zero_with_zeros_padding():
    x = np.ones((1, 1, 2, 2))
    grid = np.array([[[[3.0, 0.0], [0.0, 0.0]]]])     # far right, and the centre
    np.testing.assert_allclose(F.grid_sample(x, grid).data, [[[[0.0, 1.0]]]])
    np.testing.assert_allclose(F.grid_sample(x, grid, padding_mode="border").data,
                               [[[[1.0, 1.0]]]])


def test_gradient_reaches_a_grid_variable():
    x = lz.Variable(np.arange(4.0).reshape(1, 1, 2, 2))
    grid = lz.Variable(np.array([[[[0.0, 0.0]]]]))
    y = F.grid_sample(x, grid, align_corners=True)   # the mean of the four pixels
    y.backward()
    assert y.data.item() == 1.5
    # d/dx (pixel columns differ by 1, half the width in normalised units): 0.5; d/dy: 1.0
    np.testing.assert_allclose(grid.grad.data, [[[[0.5, 1.0]]]])
    np.testing.assert_allclose(x.grad.data, np.full((1, 1, 2, 2), 0.25))


X, G = np.ones((1, 2, 3, 3), np.float32), np.zeros((1, 2, 2, 2), np.float32)


@pytest.mark.parametrize("call,exc,match", [
    (lambda: F.grid_sample(X[0], G), ValueError, r"grid_sample: input must be 4-D .* \(2, 3, 3\)"),
    (lambda: F.grid_sample(X, G[..., :1]), ValueError, r"grid_sample: grid must have shape"),
    (lambda: F.grid_sample(X, np.zeros((2, 2, 2, 2), np.float32)), ValueError,
     r"grid_sample: grid must have shape \(N, H_out, W_out, 2\) with N = 1"),
    (lambda: F.grid_sample(X, G.astype(np.float64)), TypeError,
     "grid_sample: grid dtype float64 differs from input dtype float32"),
    (lambda: F.grid_sample(X, G, mode="bicubic"), ValueError,
     "grid_sample: mode must be one of 'bilinear', 'nearest', got 'bicubic'"),
    (lambda: F.grid_sample(X, G, padding_mode="wrap"), ValueError,
     "grid_sample: padding_mode must be one of"),
    (lambda: F.grid_sample(X, G, align_corners=None), TypeError,
     "grid_sample: align_corners must be a bool"),
    (lambda: F.grid_sample(X.astype(int), G), TypeError,
     "grid_sample: input must be floating point"),
    (lambda: F.grid_sample(X, [[0.0, 0.0]]), TypeError, "grid_sample: grid must be a Variable"),
])
def test_bad_arguments(call, exc, match):
    with pytest.raises(exc, match="^" + match):
        call()
