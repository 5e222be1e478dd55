"""Finding backends: built-ins, register(), entry points, LEZERO_BACKEND, and which
backend an array (or a Variable) belongs to."""
import sys
import types

import numpy as np
import pytest

import lezero as lz
from lezero import backends, cuda
from lezero.backends import registry
from lezero.backends.cupy_backend import CupyBackend


class ChipArray:
    """A minimal device array: host memory behind an opaque box."""

    def __init__(self, host):
        self.host = np.array(host)
        self.shape, self.dtype = self.host.shape, self.host.dtype

    def __setitem__(self, key, value):
        self.host[key] = value.host if isinstance(value, ChipArray) else value


def _chip(name="chip"):
    return backends.Backend(name, array_types=(ChipArray,))


def _chip_hooks(b):
    b.from_host = lambda a, device=None: ChipArray(a)
    b.to_host = lambda a: a.host.copy()
    return b


@pytest.fixture
def clean_registry(monkeypatch):
    monkeypatch.setattr(registry, "_loaded", dict(registry._loaded))
    monkeypatch.setattr(registry, "_plugins", {})
    monkeypatch.setattr(registry, "_by_type", {})
    monkeypatch.setattr(registry, "_types_cache", [None, (np.ndarray,)])
    yield


def test_builtins_are_available_and_unknown_names_listed():
    assert {"numpy", "cupy", "strict"} <= set(backends.available())
    assert backends.get("numpy").xp is np
    with pytest.raises(ValueError, match=r"no backend 'nope'; available: numpy, cupy, strict"):
        backends.get("nope")
    with pytest.raises(TypeError, match="expected a Backend, got str"):
        backends.register("chip")


def test_get_backend_follows_arrays_and_variables():
    strict = backends.get("strict")
    a = strict.xp.ones(2)
    assert backends.get_backend(np.ones(2), 3.0, None) is backends.get("numpy")
    assert backends.get_backend(np.ones(2), lz.Variable(a)) is strict
    assert backends.get_backend(types.SimpleNamespace(data=a)) is strict
    assert cuda.get_array_module(a) is strict.xp
    assert cuda.device_of(lz.Variable(a)) == "strict:0" and cuda.device_of(np.ones(1)) == "cpu"
    assert strict.array_types[0] in cuda.array_types()
    assert backends.of_namespace(strict.xp) is strict and backends.of_namespace(np).name == "numpy"
    with pytest.raises(ValueError, match="no loaded backend has the namespace"):
        backends.of_namespace(types.ModuleType("elsewhere"))


def test_register_a_backend_and_find_its_arrays(clean_registry):
    chip = backends.register(_chip_hooks(_chip()))
    assert "chip" in backends.available() and backends.get("chip") is chip
    d = chip.from_host(np.arange(3.0))
    assert backends.get_backend(lz.Variable(np.ones(1)), d) is chip
    assert ChipArray in cuda.array_types()
    assert cuda.as_numpy(d).tolist() == [0.0, 1.0, 2.0]


def test_entry_point_plugins_load_on_first_use(clean_registry, monkeypatch):
    module = types.ModuleType("lezero_test_chip")
    module.make = lambda: _chip_hooks(_chip("epchip"))
    monkeypatch.setitem(sys.modules, "lezero_test_chip", module)
    from importlib import metadata
    ep = metadata.EntryPoint("epchip", "lezero_test_chip:make", registry.ENTRY_POINT_GROUP)
    monkeypatch.setattr(metadata, "entry_points",
                        lambda group: [ep] if group == registry.ENTRY_POINT_GROUP else [])
    monkeypatch.setattr(registry, "_scanned", False)
    assert "epchip" in backends.available()
    assert backends.get("epchip").name == "epchip"


def test_lezero_backend_picks_the_device_of_to_gpu(monkeypatch):
    monkeypatch.setenv("LEZERO_BACKEND", "strict")
    strict = backends.get("strict")
    assert registry.default_device_name() == "strict" and cuda.is_available()
    v = lz.Variable(np.ones((2, 2), np.float32)).to_gpu()
    assert isinstance(v.data, strict.array_types)
    assert cuda.to_device(v.data, "numpy").tolist() == [[1.0, 1.0], [1.0, 1.0]]
    assert cuda.to_device(v, "strict") is v.data
    monkeypatch.setenv("LEZERO_BACKEND", "nope")
    assert cuda.is_available() is False
    monkeypatch.delenv("LEZERO_BACKEND")
    assert registry.default_device_name() == "cupy"


def test_python_scalars_are_uploaded_once_per_device_and_dtype():
    from lezero.backends.strict import counters
    import lezero.functions as F
    xp = backends.get("strict").xp
    x, y = xp.ones((2, 3), dtype=np.float32), xp.zeros((2, 3), dtype=np.float32)
    F.mse_loss(x * 3.0, y)
    with counters.count(trace=True) as c:
        loss = F.mse_loss(x * 3.0, y)
    assert (c.h2d, c.syncs) == (0, 0), c.sites
    assert loss.dtype == np.float32 and float(loss.data) == 9.0
    const = cuda.as_array(3.0, like=x)
    assert const is cuda.as_array(3.0, like=x) and const.dtype == np.float32
    with pytest.raises(ValueError):
        const[...] = 1.0                        # shared: writes into it are refused


def test_cupy_backend_without_cupy(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)
    b = CupyBackend()
    assert b.array_types == () and b.is_available() is False
    with pytest.raises(ImportError, match=r"pip install -e .\.\[gpu\]."):
        b.xp
    assert b.rng_methods >= {"random", "integers", "standard_normal"}


def test_an_object_whose_data_is_its_own_kind_is_host_data():
    """A torch tensor's ``.data`` is a tensor again: looking inside must stop there."""
    import lezero.backends as B

    class Tensorish:
        @property
        def data(self):
            return Tensorish()
    assert B.get_backend(Tensorish()).name == "numpy"
