"""Elementwise kernels split over threads (``runtime.run_elementwise``) give the same
elements as one call; the part sizes are the policy's."""
import numpy as np
import pytest

import lezero as lz
from lezero import kernels
from lezero.kernels import gelu, relu
from lezero.runtime import policy, scheduler

pytestmark = pytest.mark.skipif(not kernels.numba_available(), reason="needs Numba")


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_split_equals_one_call(monkeypatch, split_parts, approximate):
    x = np.random.default_rng(0).standard_normal(100_003).astype(np.float32)
    gy = np.random.default_rng(1).standard_normal(x.shape).astype(np.float32)
    with lz.using_config("conv_threads", 1):
        one = gelu.gelu_numba(x, approximate), gelu.gelu_grad_numba(x, gy, approximate)
    split_parts.clear()
    with lz.using_config("conv_threads", 3), policy.using(min_part_items=1000):
        split = gelu.gelu_numba(x, approximate), gelu.gelu_grad_numba(x, gy, approximate)
    assert split_parts == [3, 3]
    for a, b in zip(one, split):
        np.testing.assert_array_equal(a, b)


def test_short_arrays_run_as_one_call(monkeypatch):
    calls = []
    monkeypatch.setattr(scheduler, "run_split", lambda fn, n, parts: calls.append(parts))
    scheduler.run_elementwise(lambda a: None, np.zeros(10, np.float32))
    assert calls == [1]


def test_relu_split_equals_one_call(monkeypatch, split_parts):
    x = np.random.default_rng(0).standard_normal(100_003).astype(np.float32)
    x[:3] = (np.nan, -0.0, 0.0)
    gy = np.random.default_rng(1).standard_normal(x.shape).astype(np.float32)
    one = relu.relu_numba(x), relu.relu_grad_numba(x, gy)
    split_parts.clear()
    with lz.using_config("conv_threads", 2), policy.using(cheap_min_part_items=1000):
        split = relu.relu_numba(x), relu.relu_grad_numba(x, gy)
    assert split_parts == [2, 2]
    for a, b in zip(one, split):
        np.testing.assert_array_equal(a, b)


def test_relu_keeps_arrays_below_its_own_threshold_whole(monkeypatch, threaded):
    """ReLU's kernels are cheap per element, so they split later than GELU's: an array
    that GELU cuts in two stays one call."""
    calls = []
    monkeypatch.setattr(scheduler, "run_split", lambda fn, n, parts: calls.append(parts))
    x = np.zeros(2 * policy.min_part_items + 5, np.float32)
    assert policy.cheap_min_part_items > x.size // 2
    with lz.using_config("conv_threads", 2):
        relu.relu_numba(x)
        gelu.gelu_numba(x)
    assert calls == [1, 2]


def test_thread_count_comes_from_the_policy_and_the_setting_wins(threaded):
    with policy.using(threads=3):
        assert scheduler.threads() == 3
    with lz.using_config("conv_threads", 4):
        assert scheduler.threads() == 4              # the setting wins


@pytest.mark.parametrize("env,expected", [
    ({"NUMBA_NUM_THREADS": "3", "OMP_NUM_THREADS": "5"}, (3, "env: NUMBA_NUM_THREADS")),
    ({"OMP_NUM_THREADS": "5"}, (5, "env: OMP_NUM_THREADS")),
    ({"NUMBA_NUM_THREADS": "0"}, None), ({}, None)])
def test_the_policys_thread_count_is_read_from_the_environment(monkeypatch, env, expected):
    import os
    from lezero.runtime import settings
    for name in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert settings._environment_threads() == (expected or (os.cpu_count() or 1, "default"))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_add_splits_long_arrays_and_leaves_the_rest_to_numpy(split_parts, dtype):
    """The residual add: long C-contiguous arrays of one shape run as the kernel, split
    like ReLU; broadcasting, strided views and short arrays stay NumPy's one pass."""
    from lezero.kernels import add
    rng = np.random.default_rng(3)
    a, b = (rng.standard_normal(50_001).astype(dtype) for _ in range(2))
    with lz.using_config("conv_threads", 2), policy.using(cheap_min_part_items=1000):
        np.testing.assert_array_equal(add.add(a, b), a + b)
        assert split_parts == [2]
        for x0, x1 in ((a, b[None]), (a[::2], b[::2]), (a[:1500], b[:1500])):
            np.testing.assert_array_equal(add.add(x0, x1), x0 + x1)
    assert split_parts == [2]
