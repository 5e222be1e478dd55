"""A new chip from three hooks: without an ``xp`` every NumPy function runs on the host,
with a warning once and a count; and the numpy backend's kernel table."""
import warnings

import numpy as np
import pytest

from lezero import backends
from lezero.backends.numpy_backend import KERNELS
from tests.backends.test_registry import ChipArray, _chip, _chip_hooks


def test_host_fallback_runs_numpy_and_counts():
    chip = _chip_hooks(_chip())
    a = chip.from_host(np.arange(4.0))
    with pytest.warns(RuntimeWarning, match="backend 'chip' has no exp"):
        e = chip.xp.exp(a)
    assert isinstance(e, ChipArray) and np.allclose(e.host, np.exp(np.arange(4.0)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")             # warned once per function only
        chip.xp.exp(a)
    assert chip.fallback_counts["exp"] == 2
    assert chip.xp.float32 is np.float32 and chip.xp.pi == np.pi
    with pytest.warns(RuntimeWarning, match="divmod|norm"):
        q, r = chip.xp.divmod(a, 3.0)
        norm = chip.xp.linalg.norm(a)
    assert isinstance(q, ChipArray) and q.host.tolist() == [0.0, 0.0, 0.0, 1.0]
    assert isinstance(norm, ChipArray) and norm.host == pytest.approx(np.sqrt(14.0))


def test_fallback_ufunc_methods_and_scatter_add():
    chip = _chip_hooks(_chip())
    with pytest.warns(RuntimeWarning):
        target = chip.from_host(np.zeros(3))
        chip.scatter_add(target, np.array([0, 0, 2]), 1.0)
        assert target.host.tolist() == [2.0, 0.0, 1.0]
        assert chip.xp.add.reduce(chip.from_host(np.ones(4))).host == 4.0
        assert chip.xp.add(target, 1.0).host.tolist() == [3.0, 1.0, 2.0]
        assert chip.special.erf(chip.from_host(np.zeros(2))).host.tolist() == [0.0, 0.0]
    assert chip.fallback_counts["add.at"] == 1


def test_fallback_generator_draws_on_the_host_and_keeps_the_declared_methods():
    chip = _chip_hooks(_chip())
    with pytest.warns(RuntimeWarning, match="Generator.random"):
        a, b = chip.rng(5).random(3), chip.rng(5).random(3)
    assert isinstance(a, ChipArray) and a.host.tolist() == b.host.tolist()
    with pytest.raises(AttributeError, match="its generator has no 'normal'"):
        chip.rng(5).normal


def test_default_hooks_of_a_backend_with_a_namespace():
    b = backends.Backend("plain", np, (np.ndarray,))
    a = b.from_host([1.0, 2.0])
    assert b.to_host(a) is a and b.device_of(a) == "plain:0"
    with b.device(0):
        b.from_host([1.0], device=0)
    t = np.zeros(2)
    b.scatter_add(t, np.array([1, 1]), 1.0)
    assert t.tolist() == [0.0, 2.0] and b.rng(0).random() < 1
    assert b.synchronize() is None and b.memory_stats() == {} and b.count_transfers() is None
    assert repr(b) == "<lezero backend 'plain'>" and b.is_available()


def test_numpy_kernel_table_names_the_numba_dispatchers():
    numpy_backend = backends.get("numpy")
    assert set(numpy_backend.kernels) == set(KERNELS) and len(numpy_backend.kernels) == 24
    for name in KERNELS:
        fn = numpy_backend.kernels[name]
        assert callable(fn) and fn.__module__.startswith(("lezero.kernels.", "lezero.runtime.")), name
    target = np.zeros((4, 2), np.float32)
    numpy_backend.scatter_add(target, np.array([1, 1, 3]), np.ones((3, 2), np.float32))
    assert target[:, 0].tolist() == [0.0, 2.0, 0.0, 1.0]
    assert numpy_backend.device_of(target) == "cpu"
    assert numpy_backend.special.erf(0.0) == 0.0
