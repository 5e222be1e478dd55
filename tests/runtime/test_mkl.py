"""Intel MKL's products (lezero.runtime.mkl, lezero.runtime.gemm): the same numbers as
NumPy's, every layout MKL reads without a copy, the checks that stand before its raw
pointers, and ``blas.matmul``'s routing and split."""
import numpy as np
import pytest

from lezero.runtime import blas, gemm, mkl, policy

pytestmark = pytest.mark.skipif(mkl.library() is None, reason="the mkl wheel is not installed")


@pytest.fixture(autouse=True)
def _floats_on_mkl():
    """Float products on MKL whatever the CPU (by default only an Intel one's are)."""
    with policy.using(gemm="mkl"):
        yield


@pytest.mark.parametrize("intel", [True, False])
def test_auto_puts_products_on_mkl_only_on_an_intel_cpu(monkeypatch, intel):
    monkeypatch.setitem(mkl._found, "intel", intel)
    a = np.ones((64, 300), np.float32)
    calls = []
    monkeypatch.setattr(mkl, "checked_gemm", _spy(mkl.checked_gemm, calls))
    with policy.using(gemm="auto", gemm_team=0):
        assert mkl.used() is intel                        # int8 products too
        np.testing.assert_allclose(blas.matmul(a, a.T), a @ a.T)
        assert gemm.sgemm() is (mkl.library().cblas_sgemm if intel else
                                gemm.openblas.sgemm())
    assert len(calls) == (1 if intel else 0)
    with policy.using(gemm="numpy"):
        assert not mkl.used()


def test_the_cpu_vendor_is_read_once(monkeypatch):
    monkeypatch.delitem(mkl._found, "intel", raising=False)
    monkeypatch.setattr(mkl, "_vendor", lambda: "AuthenticAMD")
    assert mkl.intel_cpu() is False
    monkeypatch.setattr(mkl, "_vendor", lambda: "GenuineIntel")
    assert mkl.intel_cpu() is False         # cached
    monkeypatch.delitem(mkl._found, "intel")
    assert mkl.intel_cpu() is True


def _layouts(rng, m, k, dtype):
    """(name, array) of an (m, k) operand: C order, transposed F order, a row-strided view."""
    c = rng.standard_normal((m, k)).astype(dtype)
    f = np.asfortranarray(c)
    wide = rng.standard_normal((m, k + 3)).astype(dtype)
    return [("c", c), ("f", f), ("rows", wide[:, 1:k + 1])]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gemm_every_layout_matches_numpy(dtype):
    rng = np.random.default_rng(0)
    tol = dict(rtol=2e-5, atol=2e-4) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-11)
    for an, a in _layouts(rng, 37, 50, dtype):
        for bn, b in _layouts(rng, 50, 29, dtype):
            out = np.full((37, 29), np.nan, dtype)
            mkl.gemm(a, b, out)
            np.testing.assert_allclose(out, a @ b, **tol, err_msg=f"{an} @ {bn}")
            mkl.gemm(a, b, out, accumulate=True)
            np.testing.assert_allclose(out, 2 * (a @ b), **tol, err_msg=f"{an} @ {bn} +=")


def test_gemm_writes_into_a_column_block():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((8, 16)).astype(np.float32)
    b = rng.standard_normal((16, 12)).astype(np.float32)
    out = np.zeros((8, 12), np.float32)
    mkl.gemm(a, b[:, 4:9], out[:, 4:9])
    np.testing.assert_allclose(out[:, 4:9], a @ b[:, 4:9], rtol=1e-5, atol=1e-5)
    assert not out[:, :4].any() and not out[:, 9:].any()     # nothing outside the block


def test_gemm_empty_and_zero_inner():
    out = np.ones((3, 4), np.float32)
    mkl.gemm(np.zeros((3, 0), np.float32), np.zeros((0, 4), np.float32), out)
    assert not out.any()
    mkl.gemm(np.zeros((0, 5), np.float32), np.zeros((5, 4), np.float32),
             np.zeros((0, 4), np.float32))


@pytest.mark.parametrize("case, message", [
    (lambda: (np.ones((2, 3), np.float32), np.ones((3, 4), np.float64),
              np.empty((2, 4), np.float32)), "float32 or float64"),
    (lambda: (np.ones((2, 3), np.float32), np.ones((4, 4), np.float32),
              np.empty((2, 4), np.float32)), "inner dimensions"),
    (lambda: (np.ones((2, 3), np.float32), np.ones((3, 4), np.float32),
              np.empty((2, 5), np.float32)), "out must be"),
    (lambda: (np.ones((2, 3), np.float32), np.ones((3, 4), np.float32),
              np.empty((2, 4), np.float64)), "out must be"),
    (lambda: (np.ones((2, 3), np.float32), np.ones((3, 4), np.float32),
              np.empty((4, 2), np.float32).T), "out must be"),
    (lambda: (np.ones((4, 6), np.float32)[::2, ::2], np.ones((3, 4), np.float32),
              np.empty((2, 4), np.float32)), "no unit stride"),
    (lambda: (np.ones(3, np.float32), np.ones((3, 4), np.float32),
              np.empty((1, 4), np.float32)), "2-D"),
])
def test_gemm_refuses_what_mkl_would_misread(case, message):
    a, b, out = case()
    with pytest.raises(ValueError, match=message):
        mkl.gemm(a, b, out)


def test_gemm_refuses_a_read_only_out():
    out = np.empty((2, 4), np.float32)
    out.flags.writeable = False
    with pytest.raises(ValueError, match="writeable"):
        mkl.gemm(np.ones((2, 3), np.float32), np.ones((3, 4), np.float32), out)


@pytest.mark.parametrize("shape", [(300, 576, 64), (5, 1000, 33), (1, 8, 1)])
def test_int8_gemm_is_exact(shape):
    m, k, n = shape
    rng = np.random.default_rng(2)
    a = rng.integers(0, 256, (m, k)).astype(np.uint8)
    w = rng.integers(-128, 128, (n, k)).astype(np.int8)
    out = np.empty((m, n), np.int32)
    mkl.gemm_u8s8s32(a, w, out)
    np.testing.assert_array_equal(out, a.astype(np.int64) @ w.T.astype(np.int64))


def test_int8_gemm_checks_its_operands():
    a, w = np.zeros((4, 8), np.uint8), np.zeros((3, 8), np.int8)
    out = np.empty((4, 3), np.int32)
    with pytest.raises(ValueError, match="uint8"):
        mkl.gemm_u8s8s32(a.astype(np.int8), w, out)
    with pytest.raises(ValueError, match="differ in k"):
        mkl.gemm_u8s8s32(a, np.zeros((3, 7), np.int8), out)
    with pytest.raises(ValueError, match="int32"):
        mkl.gemm_u8s8s32(a, w, out.astype(np.int64))
    with pytest.raises(ValueError, match="out must be"):
        mkl.gemm_u8s8s32(a, w, np.empty((3, 4), np.int32))
    with pytest.raises(ValueError, match="unit stride"):
        mkl.gemm_u8s8s32(np.zeros((8, 4), np.uint8).T, w, out)


def test_blocks_cut_the_longer_side(threaded):
    """Rows when ``m >= n`` (each part reads all of ``b``), columns when ``n > m`` (each
    reads all of ``a``), and columns or rows when the other side is too short to cut."""
    with policy.using(threads=2, gemm_min_part_flops=1.0, gemm_min_part_rows=32,
                      small_flops=0.0):
        assert gemm.blocks(256, 2304, 196) == ("rows", [(0, 128), (128, 256)])
        assert gemm.blocks(256, 768, 256) == ("rows", [(0, 128), (128, 256)])
        assert gemm.blocks(256, 768, 3072) == ("cols", [(0, 1536), (1536, 3072)])
        assert gemm.blocks(4, 768, 3072) == ("cols", [(0, 1536), (1536, 3072)])
        assert gemm.blocks(3072, 768, 40) == ("rows", [(0, 1536), (1536, 3072)])
    with policy.using(small_flops=1e12):
        assert gemm.blocks(256, 768, 768) == ("rows", [(0, 256)])


def _spy(fn, calls):
    return lambda *args, **kw: calls.append(1) or fn(*args, **kw)


@pytest.mark.parametrize("shape", [(256, 300, 200), (4, 300, 1000), (7, 5, 3)])
def test_matmul_routes_to_mkl_and_matches_numpy(monkeypatch, threaded, shape):
    m, k, n = shape
    rng = np.random.default_rng(3)
    a = rng.standard_normal((m, k)).astype(np.float32)
    w = rng.standard_normal((n, k)).astype(np.float32)
    calls = []
    # every MKL call ends in checked_gemm (gemm checks, then calls it); the native team's
    # blocks call MKL from Numba (tests/runtime/test_gemm_team.py), so it is off here
    monkeypatch.setattr(mkl, "checked_gemm", _spy(mkl.checked_gemm, calls))
    with policy.using(gemm="mkl", small_flops=1e5, gemm_min_part_flops=1e4, threads=2,
                      gemm_team=0):
        y = blas.matmul(a, w.T)
        parts = len(gemm.blocks(m, k, n)[1])
    np.testing.assert_allclose(y, a @ w.T, rtol=2e-5, atol=2e-4)
    assert len(calls) == parts and parts == (1 if m * n < 100 else 2)
    calls.clear()
    with policy.using(gemm="numpy"):
        np.testing.assert_allclose(blas.matmul(a, w.T), a @ w.T, rtol=2e-5, atol=2e-4)
    assert not calls


def test_stacks_of_large_matrices_go_to_mkl_and_small_ones_to_numpy(monkeypatch, threaded):
    rng = np.random.default_rng(4)
    calls = []
    monkeypatch.setattr(mkl, "checked_gemm", _spy(mkl.checked_gemm, calls))
    w = rng.standard_normal((2, 1, 40, 50)).astype(np.float32)        # broadcast over axis 1
    x = rng.standard_normal((2, 3, 50, 60)).astype(np.float32).transpose(0, 1, 3, 2)
    x = np.ascontiguousarray(x).transpose(0, 1, 3, 2)                  # matrices transposed
    out = np.empty((2, 3, 40, 60), np.float32)
    with policy.using(small_flops=1e3, gemm_min_part_flops=1e3, threads=2):
        assert blas.matmul_nd(np, w, x, out=out) is out
    np.testing.assert_allclose(out, np.matmul(w, x), rtol=2e-5, atol=2e-4)
    assert len(calls) == 6                                              # one per matrix
    calls.clear()
    with policy.using(small_flops=1e9):
        np.testing.assert_allclose(blas.matmul_nd(np, w, x), np.matmul(w, x), rtol=2e-5,
                                   atol=2e-4)
    assert not calls


def test_matmul_leaves_other_dtypes_and_strides_to_numpy(monkeypatch):
    monkeypatch.setattr(mkl, "gemm", lambda *a, **k: pytest.fail("MKL was called"))
    monkeypatch.setattr(mkl, "checked_gemm", lambda *a, **k: pytest.fail("MKL was called"))
    ints = np.arange(12).reshape(3, 4)
    np.testing.assert_array_equal(blas.matmul(ints, ints.T), ints @ ints.T)
    x = np.ones((8, 8), np.float32)[::2, ::2]
    np.testing.assert_array_equal(blas.matmul(x, x), x @ x)
    np.testing.assert_array_equal(blas.matmul(x.astype(np.float16), x.astype(np.float16)),
                                  (x @ x).astype(np.float16))


def test_a_stack_times_one_matrix_is_one_merged_product(monkeypatch, threaded):
    rng = np.random.default_rng(5)
    calls = []
    monkeypatch.setattr(mkl, "checked_gemm", _spy(mkl.checked_gemm, calls))
    x = rng.standard_normal((3, 40, 30)).astype(np.float32)
    w = rng.standard_normal((20, 30)).astype(np.float32)
    with policy.using(small_flops=1e12):
        y = blas.matmul_nd(np, x, w.T)
    np.testing.assert_allclose(y, x @ w.T, rtol=2e-5, atol=2e-4)
    assert len(calls) == 1 and y.shape == (3, 40, 20)


def test_small_stacks_run_on_this_thread_one_mkl_call_per_matrix(monkeypatch):
    """A stack of matrices below ``small_flops`` each but above ``stack_min_flops`` runs
    serially on MKL, each matrix found by its byte offset -- broadcast, transposed and
    row-strided operands alike; below ``stack_min_flops`` NumPy runs it."""
    rng = np.random.default_rng(6)
    calls = []
    monkeypatch.setattr(mkl, "gemm_at", _spy(mkl.gemm_at, calls))
    w = rng.standard_normal((1, 3, 40, 50)).astype(np.float32)         # broadcast over axis 0
    x = np.ascontiguousarray(
        rng.standard_normal((2, 3, 60, 50)).astype(np.float32)).transpose(0, 1, 3, 2)
    wide = np.full((2, 3, 40, 64), np.nan, np.float32)
    out = wide[..., 2:62]                                              # rows of 64 items
    with policy.using(small_flops=1e9, stack_min_flops=1e3):
        assert blas.matmul_nd(np, w, x, out=out) is out
        y = blas.matmul_nd(np, w[0, 1], x)                              # a 2-D a
    np.testing.assert_allclose(out, np.matmul(w, x), rtol=2e-5, atol=2e-4)
    np.testing.assert_allclose(y, np.matmul(w[0, 1], x), rtol=2e-5, atol=2e-4)
    assert np.isnan(wide[..., :2]).all() and np.isnan(wide[..., 62:]).all()
    assert len(calls) == 12                                             # one per matrix
    calls.clear()
    with policy.using(small_flops=1e9, stack_min_flops=1e9):
        np.testing.assert_allclose(blas.matmul_nd(np, w, x), np.matmul(w, x), rtol=2e-5,
                                   atol=2e-4)
    assert not calls


def test_products_split_natively_unless_mkl_runs_without_its_team():
    with policy.using(gemm="numpy", openblas_thread_flops=1e6):
        assert gemm.native_threads() and gemm.native_threads(1e6)   # OpenBLAS's threads
        assert not gemm.native_threads(1e6 - 1)     # a small one: NumPy loops, one thread
    with policy.using(gemm="mkl", gemm_team=0):
        assert not gemm.native_threads()        # LeZero's Python workers
    with policy.using(gemm="mkl", gemm_team=1):
        assert gemm.native_threads(1.0) == gemm.gemm_team.available()   # stacks too
