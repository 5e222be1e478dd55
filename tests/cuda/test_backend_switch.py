"""The NumPy/CuPy switch and the CuPy generator, with a stand-in ``cupy`` module.

There is no GPU here, so the branches taken once CuPy is loaded are exercised with a small
fake module in ``sys.modules`` (its own ndarray class, ``asarray``/``asnumpy``, a device
context and a random generator factory).  The real CuPy runs in the tests marked gpu.
"""
import contextlib
import sys
import types

import numpy as np
import pytest

import lezero as lz
from lezero import cuda
from lezero import random as lz_random


class FakeDeviceArray:
    """An array the fake CuPy owns: not a NumPy array, like cupy.ndarray."""
    device = types.SimpleNamespace(id=0)

    def __init__(self, a):
        self.host = np.array(a)


def _fake_cupy(available=True):
    m = types.ModuleType("cupy")
    m.ndarray = FakeDeviceArray
    m.asarray = FakeDeviceArray
    m.asnumpy = lambda a: a.host.copy()
    devices = []

    @contextlib.contextmanager
    def device(i):
        devices.append(i)
        yield

    m.cuda = types.SimpleNamespace(is_available=lambda: available, Device=device)
    m.random = types.SimpleNamespace(default_rng=lambda seed: ("cupy-rng", seed))
    m.devices = devices
    return m


@pytest.fixture(autouse=True)
def _cupy_is_the_default_device(monkeypatch):
    monkeypatch.delenv("LEZERO_BACKEND", raising=False)


@pytest.fixture
def fake_cupy(monkeypatch):
    m = _fake_cupy()
    monkeypatch.setitem(sys.modules, "cupy", m)
    yield m
    lz_random.swap_cupy_rng(None)


def test_without_cupy_everything_is_numpy(monkeypatch):
    monkeypatch.delitem(sys.modules, "cupy", raising=False)
    a = np.ones(2)
    assert cuda.array_types()[0] is np.ndarray and FakeDeviceArray not in cuda.array_types()
    assert cuda.get_array_module(a, lz.Variable(a)) is np
    assert cuda.device_of(lz.Variable(a)) == "cpu"
    assert cuda.as_numpy(3.0) == np.asarray(3.0)


def test_as_cupy_without_cupy_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)      # `import cupy` raises ImportError
    with pytest.raises(ImportError, match=r"pip install -e .\.\[gpu\]."):
        cuda.as_cupy(np.ones(2))
    assert cuda.is_available() is False


def test_array_module_and_device_follow_the_arrays(fake_cupy):
    host = np.ones(3)
    dev = fake_cupy.asarray(host)
    assert cuda.array_types()[0] is np.ndarray and FakeDeviceArray in cuda.array_types()
    assert cuda.get_array_module(host) is np
    assert cuda.get_array_module(host, types.SimpleNamespace(data=dev)) is fake_cupy
    assert cuda.get_array_module(dev) is fake_cupy
    assert cuda.device_of(dev) == "cuda:0"
    assert cuda.device_of(lz.Variable(host)) == "cpu"
    assert cuda.is_available() is True


def test_as_numpy_and_as_cupy_convert_both_ways(fake_cupy):
    host = np.arange(3.0)
    dev = cuda.as_cupy(lz.Variable(host))
    assert type(dev) is FakeDeviceArray and fake_cupy.devices == []
    back = cuda.as_numpy(dev)
    assert type(back) is np.ndarray and back.tolist() == [0.0, 1.0, 2.0]
    assert cuda.as_numpy(lz.Variable(host)) is host
    cuda.as_cupy(host, device=1)
    assert fake_cupy.devices == [1]


def test_manual_seed_seeds_the_cupy_generator_too(fake_cupy):
    lz.manual_seed(7)
    assert lz_random.get_rng(fake_cupy) == ("cupy-rng", 7)
    assert lz_random.initial_seed() == 7


def test_cupy_generator_is_made_on_first_use_from_the_numpy_one(fake_cupy):
    lz_random.swap_cupy_rng(None)
    lz.manual_seed(3)
    monkey = lz_random.swap_cupy_rng(None)
    assert monkey == ("cupy-rng", 3)
    first = lz_random.get_rng(fake_cupy)
    assert first[0] == "cupy-rng" and isinstance(first[1], int)
    assert lz_random.get_rng(fake_cupy) is first            # then kept


def test_rng_state_round_trip_replays_draws():
    lz.manual_seed(0)
    state = lz_random.get_rng_state()
    a = lz_random.get_rng().random(3)
    lz_random.set_rng_state(state)
    np.testing.assert_array_equal(lz_random.get_rng().random(3), a)


@pytest.mark.parametrize("bad", [-1, 1.5, True, "3"])
def test_manual_seed_rejects_what_is_not_a_non_negative_int(bad):
    with pytest.raises(ValueError, match="manual_seed: seed must be a non-negative int"):
        lz.manual_seed(bad)
