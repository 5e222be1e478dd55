"""Elementwise kernels split over threads (``threads.run_elementwise``) give the same
elements as one call."""
import numpy as np
import pytest

import lezero as lz
from lezero import kernels
from lezero.kernels import gelu, threads

pytestmark = pytest.mark.skipif(not kernels.numba_available(), reason="needs Numba")


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_split_equals_one_call(monkeypatch, approximate):
    x = np.random.default_rng(0).standard_normal(100_003).astype(np.float32)
    gy = np.random.default_rng(1).standard_normal(x.shape).astype(np.float32)
    with lz.using_config("conv_threads", 1):
        one = gelu.gelu_numba(x, approximate), gelu.gelu_grad_numba(x, gy, approximate)
    calls = []
    real = threads.run_split
    monkeypatch.setattr(threads, "run_split",
                        lambda fn, n, parts: calls.append(parts) or real(fn, n, parts))
    monkeypatch.setattr(threads, "MIN_PART_ITEMS", 1000)
    with lz.using_config("conv_threads", 3):
        split = gelu.gelu_numba(x, approximate), gelu.gelu_grad_numba(x, gy, approximate)
    assert calls == [3, 3]
    for a, b in zip(one, split):
        np.testing.assert_array_equal(a, b)


def test_short_arrays_run_as_one_call(monkeypatch):
    calls = []
    monkeypatch.setattr(threads, "run_split", lambda fn, n, parts: calls.append(parts))
    threads.run_elementwise(lambda a: None, np.zeros(10, np.float32))
    assert calls == [1]
