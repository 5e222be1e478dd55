"""Attention's fused softmax: the Numba kernels equal the NumPy path, and the gradient
Function is itself differentiable (so attention has a second derivative)."""
import numpy as np
import pytest
import torch

import lezero as lz
from lezero.functions.attention.masked_softmax import MaskedSoftmax, MaskedSoftmaxGrad
from lezero.kernels import numba_available
from lezero.testing import check_double_backward, check_gradient, rand

needs_numba = pytest.mark.skipif(not numba_available(), reason="Numba is not installed")


def _both_paths(fn):
    """fn() with the Numba kernels and with the NumPy path."""
    with lz.using_config("use_numba", False):
        ref = fn()
    return fn(), ref


@needs_numba
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape,scale", [((2, 3, 5, 5), 0.35), ((4, 3, 7), -1.5),
                                         ((6, 2), 1.0), ((2, 5, 3), 2.0)])
def test_kernel_forward_and_gradient_equal_numpy(shape, scale, causal):
    s = rand(*shape, dtype=np.float32, low=-6, high=6, seed=1)
    gy = rand(*shape, dtype=np.float32, seed=2)
    y, y_ref = _both_paths(lambda: MaskedSoftmax(None, scale, causal)(s).data)
    np.testing.assert_allclose(y, y_ref, rtol=2e-6, atol=1e-7)
    assert y.dtype == np.float32
    if causal:      # nothing above the diagonal of each (L, S) matrix
        assert not np.triu(y, 1).any()
    g, g_ref = _both_paths(lambda: MaskedSoftmaxGrad(scale)(y_ref, gy).data)
    np.testing.assert_allclose(g, g_ref, rtol=1e-5, atol=1e-6)


@needs_numba
def test_kernel_rows_of_minus_inf_give_zeros_and_large_scores_stay_finite():
    s = np.array([[-np.inf, -np.inf, -np.inf], [1e30, 0, -1e30], [np.nan, 0, 1]], np.float32)
    y, y_ref = _both_paths(lambda: MaskedSoftmax()(s).data)
    np.testing.assert_array_equal(y[0], [0, 0, 0])
    np.testing.assert_array_equal(y[1], [1, 0, 0])
    assert np.isnan(y[2]).all() and np.isnan(y_ref[2]).all()
    np.testing.assert_array_equal(y[:2], y_ref[:2])


def test_softmax_matches_torch_in_float32():
    s = rand(3, 4, 6, dtype=np.float32, low=-3, high=3, seed=4)
    gy = rand(3, 4, 6, dtype=np.float32, seed=5)
    v = lz.Variable(s)
    y = MaskedSoftmax(None, 0.5, True)(v)
    (y * gy).sum().backward()
    t = torch.tensor(s, requires_grad=True)
    mask = torch.ones(4, 6, dtype=torch.bool).tril()
    ty = torch.softmax((t * 0.5).masked_fill(~mask, float("-inf")), -1)
    ty.backward(torch.tensor(gy))
    np.testing.assert_allclose(y.data, ty.detach().numpy(), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(v.grad.data, t.grad.numpy(), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("causal", [False, True])
def test_gradients_and_second_derivatives_float64(causal):
    keep = np.random.default_rng(0).random((4, 5)) > 0.3
    keep[:, 0] = True
    check_gradient(lambda s: MaskedSoftmax(keep, 0.7, causal)(s), rand(2, 4, 5, seed=6))
    check_double_backward(lambda s: MaskedSoftmax(None, 1.3, causal)(s), rand(2, 4, 5, seed=7))
    y = MaskedSoftmax(None, 1.0, causal)(rand(2, 4, 5, seed=8)).data
    check_gradient(lambda y, gy: MaskedSoftmaxGrad(0.6)(y, gy), y, rand(2, 4, 5, seed=9))
