"""``lezero.runtime.limited_to(n)``: every pool LeZero uses (its split kernels, Numba's
parallel loops, BLAS) holds at most ``n`` threads inside the block, and comes back after."""
import pytest

from lezero import runtime
from lezero.runtime import blas, lazyjit


def _blas_threads():
    return [lib.num_threads for lib in blas.controller().select(user_api="blas").lib_controllers]


def test_every_pool_is_limited_inside_and_restored_after():
    if blas.controller() is None:
        pytest.skip("threadpoolctl cannot inspect this process")
    numba = lazyjit.numba_module()
    before = (runtime.policy.threads, _blas_threads(), numba and numba.get_num_threads())
    with runtime.limited_to(1):
        assert runtime.policy.threads == 1 and runtime.threads_for(10, 1e12, 1) == 1
        assert set(_blas_threads()) == {1}
        if numba:
            assert numba.get_num_threads() == 1
    assert (runtime.policy.threads, _blas_threads(), numba and numba.get_num_threads()) == before


@pytest.mark.parametrize("n", [0, -1, 1.5, True])
def test_a_bad_count_is_named(n):
    with pytest.raises(ValueError, match="limited_to: n must be a positive int"):
        with runtime.limited_to(n):
            pass
