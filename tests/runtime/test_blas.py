"""Small products on one BLAS thread: the same numbers as NumPy's product, and the BLAS
thread count comes back after the block."""
import numpy as np
import pytest

import lezero as lz
from lezero import nn
from lezero.runtime import blas, policy


@pytest.mark.parametrize("shape", [(64, 400, 120), (20, 256, 1024), (300, 300, 300), (3, 1, 2)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_matmul_matches_reference(shape, dtype):
    m, k, n = shape
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((m, k)).astype(dtype), rng.standard_normal((n, k)).astype(dtype)
    ref = blas.matmul_ref(a, b.T)
    # One BLAS thread may block the sum differently from several: equal up to rounding
    # (float32 sums of 400 products of unit normals round at about 1e-5).
    tol = dict(rtol=1e-5, atol=1e-4) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-11)
    np.testing.assert_allclose(blas.matmul(a, b.T), ref, **tol)
    assert blas.matmul(a, b.T).dtype == dtype


def test_is_small_threshold():
    assert blas.is_small(64, 400, 120)          # LeNet's linear layers: one thread
    assert blas.is_small(64, 120, 84)
    assert not blas.is_small(20, 256, 1024)     # an LSTM step's recurrent product: threaded
    assert not blas.is_small(1000, 1000, 1000)
    with policy.using(small_flops=1e12):        # the policy's threshold, changed in code
        assert blas.is_small(1000, 1000, 1000)


def test_one_blas_thread_holds_and_restores_the_count():
    threadpoolctl = pytest.importorskip("threadpoolctl")
    ctl = threadpoolctl.ThreadpoolController()
    assert blas.controller() is blas.controller()      # one controller for the process
    with ctl.limit(limits=2, user_api="blas"):
        before = [c.get_num_threads() for c in blas._blas_libs()]
        with blas.one_blas_thread():
            assert all(c.get_num_threads() == 1 for c in blas._blas_libs())
        assert [c.get_num_threads() for c in blas._blas_libs()] == before
        with lz.using_config("small_gemm_one_thread", False), blas.one_blas_thread():
            assert [c.get_num_threads() for c in blas._blas_libs()] == before


def test_lstm_layer_same_with_and_without_one_thread():
    lz.manual_seed(0)
    layer = nn.LSTM(8, 16)
    x = np.random.default_rng(1).standard_normal((5, 3, 8)).astype(np.float32)
    results = []
    for flag in (True, False):
        layer.zero_grad()
        with lz.using_config("small_gemm_one_thread", flag):
            out, (h, c) = layer(x)
            (out * out).sum().backward()
        results.append([out.data, h.data] + [p.grad.data.copy() for p in layer.parameters()])
    for on, off in zip(*results):
        np.testing.assert_allclose(on, off, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("rows", [2, 5, 32, 33])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_few_rows_times_a_transposed_matrix(monkeypatch, rows, dtype):
    """A small ``x @ W.T`` with 2..policy.few_rows rows of x runs as ``(W @ x.T).T`` on
    one BLAS thread: NumPy's numbers (the sums in another order: equal up to rounding),
    C order, any dtype.  Where small products are not held to one thread, a W that is
    not a transposed view, or the policy at 1, it runs as it is."""
    rng = np.random.default_rng(rows)
    x = (rng.standard_normal((rows, 70)) * 8).astype(dtype)
    w = (rng.standard_normal((300, 70)) * 8).astype(dtype)
    seen = []
    real = np.matmul
    monkeypatch.setattr(np, "matmul", lambda a, b: seen.append((a.shape, b.shape)) or real(a, b))
    turned = [((300, 70), (70, rows))] if rows <= policy.few_rows else []
    for one_thread in (False, True):
        seen.clear()
        with lz.using_config("small_gemm_one_thread", one_thread):
            got = blas.matmul(x, w.T)
        assert seen == (turned if one_thread else [])
        assert got.flags.c_contiguous and got.dtype == dtype
        if dtype == np.int64:
            np.testing.assert_array_equal(got, x @ w.T)
        else:
            np.testing.assert_allclose(got, x @ w.T, rtol=1e-5, atol=1e-3)
    seen.clear()
    blas.matmul(x, np.ascontiguousarray(w.T))
    with policy.using(few_rows=1):
        blas.matmul(x, w.T)
    assert seen == []
