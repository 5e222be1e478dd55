"""``blas.split_stack``: a stack of products on NumPy's BLAS cut by its leading axis into one
part per thread gives NumPy's own product, and is cut only where it should be."""
import numpy as np
import pytest

import lezero as lz
from lezero.runtime import blas, policy, scheduler

pytestmark = pytest.mark.skipif(blas.controller() is None,
                                reason="splitting needs threadpoolctl")


@pytest.fixture
def parts(monkeypatch, threaded):
    """The part counts of the ``run_parts`` calls made (each still runs), with two threads
    and products on NumPy (not MKL, whose stacks take ``gemm.stacked``)."""
    ran = []
    real = scheduler.run_parts
    monkeypatch.setattr(scheduler, "run_parts", lambda fn, n: ran.append(n) or real(fn, n))
    with lz.using_config("conv_threads", 2), policy.using(gemm="numpy"):
        yield ran


def _rand(rng, *shapes, dtype=np.float32):
    return [rng.standard_normal(s).astype(dtype) for s in shapes]


# (a, b): Winograd's stack, a weight broadcast over a batch (im2col per sample, 1x1
# convolutions), a stack against one matrix, two leading axes, an odd count
CASES = [((16, 64, 64), (16, 64, 49)), ((2, 64, 147), (6, 2, 147, 300)),
         ((6, 96, 80), (80, 64)), ((4, 3, 40, 50), (4, 3, 50, 60)), ((9, 64, 64), (9, 64, 40))]


@pytest.mark.parametrize("shapes", CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("with_out", [False, True])
def test_cut_stack_equals_numpy(parts, shapes, dtype, with_out):
    a, b = _rand(np.random.default_rng(0), *shapes, dtype=dtype)
    ref = np.matmul(a, b)
    out = np.full(ref.shape, np.nan, dtype) if with_out else None
    with policy.using(gemm_min_part_flops=1e3):
        got = blas.matmul_nd(np, a, b, out=out)
    assert parts == [2]
    assert got.dtype == dtype and (got is out if with_out else True)
    tol = dict(rtol=1e-5, atol=1e-4) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-11)
    np.testing.assert_allclose(got, ref, **tol)


def test_out_may_be_a_strided_view(parts):
    """The products write into a transposed view (im2col's per-sample gradient does)."""
    a, b = _rand(np.random.default_rng(1), (8, 30, 20), (8, 20, 25))
    base = np.zeros((30, 8, 25), np.float32)
    with policy.using(gemm_min_part_flops=1e3):
        blas.matmul_nd(np, a, b, out=base.transpose(1, 0, 2))
    assert parts == [2]
    np.testing.assert_allclose(base.transpose(1, 0, 2), np.matmul(a, b), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("case", ["setting off", "too little work", "one matrix",
                                  "two of three", "one thread"])
def test_when_it_does_not_cut(parts, case):
    shapes = {"one matrix": ((1, 64, 64), (1, 64, 64)),
              "two of three": ((3, 64, 64), (3, 64, 64))}.get(case, ((16, 64, 64), (16, 64, 8)))
    a, b = _rand(np.random.default_rng(2), *shapes)
    least = 1e12 if case == "too little work" else 1e3
    with policy.using(gemm_min_part_flops=least, split_stacks=int(case != "setting off")), \
            lz.using_config("conv_threads", 1 if case == "one thread" else 2):
        got = blas.split_stack(a, b)
    assert parts == []
    np.testing.assert_allclose(got, np.matmul(a, b), rtol=1e-5, atol=1e-4)


def test_wrong_shapes_raise_numpy_errors(parts):
    a, b = _rand(np.random.default_rng(3), (16, 64, 64), (16, 63, 8))
    with policy.using(gemm_min_part_flops=1e3), pytest.raises(ValueError):
        blas.matmul_nd(np, a, b)
    with policy.using(gemm_min_part_flops=1e3), pytest.raises(ValueError):
        blas.matmul_nd(np, a, _rand(np.random.default_rng(4), (16, 64, 8))[0],
                       out=np.empty((16, 64, 9), np.float32))
    assert parts == []


@pytest.mark.parametrize("shapes", [((4, 8, 16), (4, 16, 8)), ((1, 8, 16), (4, 1, 16, 8)),
                                    ((8, 16), (4, 16, 8))])
@pytest.mark.parametrize("above", [False, True])
def test_cut_from_two_parts_of_work(parts, shapes, above):
    """A stack whose work makes exactly two parts of ``gemm_min_part_flops`` is cut (the
    early exit for small stacks counts a broadcast weight's matrices right); a hair
    less is not."""
    a, b = _rand(np.random.default_rng(5), *shapes)
    work = 2.0 * 8 * 16 * 8 * 4                  # four (8, 16) @ (16, 8) products
    with policy.using(gemm_min_part_flops=work / 2 if above else work / 2 * 1.001):
        got = blas.split_stack(a, b)
    assert parts == ([2] if above else [])
    np.testing.assert_allclose(got, np.matmul(a, b), rtol=1e-5, atol=1e-4)
