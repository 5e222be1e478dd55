"""Batch norm's Numba kernels (lezero.kernels.batchnorm) against the float64 truth, the
checks before their unchecked indexing, and ``F.batch_norm`` running on them."""
import numpy as np
import pytest

import lezero as lz
import lezero.functions as F
from lezero.kernels import batchnorm, numba_available

pytestmark = pytest.mark.skipif(not numba_available(), reason="Numba is not installed")

SHAPES = [(2, 3, 5), (4, 16, 7, 9), (1, 2, 1, 1), (3, 5, 2, 2, 2)]


def _data(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 3 + 1).astype(dtype)
    w = rng.standard_normal(shape[1]).astype(dtype)
    b = rng.standard_normal(shape[1]).astype(dtype)
    gy = rng.standard_normal(shape).astype(dtype)
    return x, w, b, gy


def _close(got, want, dtype, scale):
    """Within a few roundings of the output's scale (the kernel sums in float64: its
    error is the final rounding and the saved statistics' float32 rounding)."""
    tol = 64 * np.finfo(dtype).eps * scale
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=0, atol=tol)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_forward_and_backward_match_the_float64_truth(shape, dtype):
    x, w, b, gy = _data(shape, dtype)
    y, mean, var, rstd = batchnorm.batch_norm(x, w, b, 1e-5)
    x64, w64, b64, g64 = (a.astype(np.float64) for a in (x, w, b, gy))
    ty, tmean, tvar, trstd = batchnorm.batch_norm_ref(x64, w64, b64, 1e-5)
    assert y.dtype == dtype and mean.dtype == dtype and y.shape == x.shape
    _close(y, ty, dtype, np.abs(ty).max())
    _close(mean, tmean, dtype, np.abs(tmean).max())
    _close(var, tvar, dtype, np.abs(tvar).max())
    _close(rstd, trstd, dtype, np.abs(trstd).max())
    gx, gw, gb = batchnorm.batch_norm_grad(x, gy, w, mean, rstd)
    tgx, tgw, tgb = batchnorm.batch_norm_grad_ref(x64, g64, w64, tmean, trstd)
    count = x.size // x.shape[1]
    _close(gx, tgx, dtype, np.abs(tgx).max() + np.abs(w64 * trstd).max())
    _close(gw, tgw, dtype, count * np.abs(g64).max() * 4)
    _close(gb, tgb, dtype, count * np.abs(g64).max())
    gx_none, gw2, _ = batchnorm.batch_norm_grad(x, gy, w, mean, rstd, need_gx=False)
    assert gx_none is None and np.array_equal(gw2, gw)


def test_a_constant_channel_with_eps_zero():
    x = np.ones((2, 2, 3), np.float32)
    x[:, 1] = np.arange(6, dtype=np.float32).reshape(2, 3)
    w, b = np.full(2, 2.0, np.float32), np.array([0.5, 0.0], np.float32)
    y, _, var, rstd = batchnorm.batch_norm(x, w, b, 0.0, zero_var_rstd=True)
    assert var[0] == 0 and rstd[0] == 0 and np.all(y[:, 0] == 0.5)     # PyTorch's batch norm
    _, _, _, rstd = batchnorm.batch_norm(x, w, b, 0.0, zero_var_rstd=False)
    assert np.isinf(rstd[0])


def test_a_nan_stays_in_its_channel():
    x, w, b, gy = _data((2, 3, 4), np.float32)
    x[1, 2, 3] = np.nan
    y, mean, _, rstd = batchnorm.batch_norm(x, w, b, 1e-5)
    assert np.isnan(y[:, 2]).all() and np.isfinite(y[:, :2]).all()
    gx, gw, gb = batchnorm.batch_norm_grad(x, gy, w, mean, rstd)
    assert np.isnan(gx[:, 2]).all() and np.isfinite(gx[:, :2]).all() and np.isnan(gw[2])


@pytest.mark.parametrize("call, message", [
    (lambda x, w: batchnorm.batch_norm(x[:, :, ::2], w, w, 1e-5), "C-contiguous"),
    (lambda x, w: batchnorm.batch_norm(x.reshape(2, -1), w, w, 1e-5), "3 or more dims"),
    (lambda x, w: batchnorm.batch_norm(x.astype(np.float16), w, w, 1e-5), "float32/float64"),
    (lambda x, w: batchnorm.batch_norm(x, w[:2], w, 1e-5), "bias|weight"),
    (lambda x, w: batchnorm.batch_norm_grad(x, x[:1], w, w, w), "gy must be"),
    (lambda x, w: batchnorm.batch_norm_grad(x, x, w, w[:1], w), "mean"),
])
def test_the_kernels_refuse_what_they_would_misread(call, message):
    x = np.ones((2, 3, 4), np.float32)
    with pytest.raises(ValueError, match=message):
        call(x, np.ones(3, np.float32))


def test_batch_norm_runs_on_the_kernel_and_agrees_with_the_array_path(monkeypatch):
    x, w, b, gy = _data((4, 6, 5, 5), np.float32, seed=3)
    calls = []
    real = batchnorm.batch_norm
    monkeypatch.setattr(batchnorm, "batch_norm", lambda *a, **k: calls.append(1) or real(*a, **k))

    def run():
        xv, wv, bv = lz.Variable(x.copy()), lz.Parameter(w.copy()), lz.Parameter(b.copy())
        rm, rv = np.zeros(6, np.float32), np.ones(6, np.float32)
        y = F.batch_norm(xv, rm, rv, wv, bv, training=True)
        y.backward(grad=lz.Variable(gy))
        return y.data, xv.grad.data, wv.grad.data, bv.grad.data, rm, rv

    fast = run()
    assert calls == [1]
    with lz.using_config("use_numba", False):
        slow = run()
    assert calls == [1]
    for f, s in zip(fast, slow):
        np.testing.assert_allclose(f, s, rtol=1e-4, atol=1e-5)
