"""Elementwise kernels split over threads (``threads.run_elementwise``) give the same
elements as one call."""
import numpy as np
import pytest

import lezero as lz
from lezero import kernels
from lezero.kernels import gelu, relu, threads

pytestmark = pytest.mark.skipif(not kernels.numba_available(), reason="needs Numba")


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_split_equals_one_call(monkeypatch, split_parts, approximate):
    x = np.random.default_rng(0).standard_normal(100_003).astype(np.float32)
    gy = np.random.default_rng(1).standard_normal(x.shape).astype(np.float32)
    with lz.using_config("conv_threads", 1):
        one = gelu.gelu_numba(x, approximate), gelu.gelu_grad_numba(x, gy, approximate)
    split_parts.clear()
    monkeypatch.setattr(threads, "MIN_PART_ITEMS", 1000)
    with lz.using_config("conv_threads", 3):
        split = gelu.gelu_numba(x, approximate), gelu.gelu_grad_numba(x, gy, approximate)
    assert split_parts == [3, 3]
    for a, b in zip(one, split):
        np.testing.assert_array_equal(a, b)


def test_short_arrays_run_as_one_call(monkeypatch):
    calls = []
    monkeypatch.setattr(threads, "run_split", lambda fn, n, parts: calls.append(parts))
    threads.run_elementwise(lambda a: None, np.zeros(10, np.float32))
    assert calls == [1]


def test_relu_split_equals_one_call(monkeypatch, split_parts):
    x = np.random.default_rng(0).standard_normal(100_003).astype(np.float32)
    x[:3] = (np.nan, -0.0, 0.0)
    gy = np.random.default_rng(1).standard_normal(x.shape).astype(np.float32)
    one = relu.relu_numba(x), relu.relu_grad_numba(x, gy)
    split_parts.clear()
    monkeypatch.setattr(relu, "MIN_PART_ITEMS", 1000)
    with lz.using_config("conv_threads", 2):
        split = relu.relu_numba(x), relu.relu_grad_numba(x, gy)
    assert split_parts == [2, 2]
    for a, b in zip(one, split):
        np.testing.assert_array_equal(a, b)


def test_relu_keeps_arrays_below_its_own_threshold_whole(monkeypatch):
    """ReLU's kernels are cheap per element, so they split later than GELU's: an array
    that GELU cuts in two stays one call."""
    calls = []
    monkeypatch.setattr(threads, "run_split", lambda fn, n, parts: calls.append(parts))
    x = np.zeros(4 * threads.MIN_PART_ITEMS, np.float32)
    with lz.using_config("conv_threads", 2):
        relu.relu_numba(x)
        gelu.gelu_numba(x)
    assert calls == [1, 2]


def test_thread_count_from_the_environment_is_read_once(monkeypatch):
    monkeypatch.setattr(threads, "_from_environment", [])
    monkeypatch.setenv("NUMBA_NUM_THREADS", "3")
    assert threads.threads() == 3
    monkeypatch.setenv("NUMBA_NUM_THREADS", "5")
    assert threads.threads() == 3                  # cached for the process
    with lz.using_config("conv_threads", 4):
        assert threads.threads() == 4              # the setting still wins
