"""The pytest plugin that stands the strict device in for CuPy (``make test-backends`` runs
the gpu-marked tests with it): ``import cupy`` gives strict arrays that the ``cupy``
backend owns, with the CuPy API beyond NumPy's that LeZero uses."""
import sys
import types

import numpy as np
import pytest

from lezero import backends, cuda
from lezero.backends import registry
from lezero.backends.strict import counters
from lezero.testing.conformance import strict_as_cupy


@pytest.fixture
def fake_cupy(monkeypatch):
    for name in ("cupy", "cupyx", "cupyx.scipy", "cupyx.scipy.special"):
        monkeypatch.setitem(sys.modules, name, None)     # restored (deleted) afterwards
    monkeypatch.setattr(registry, "_loaded", dict(registry._loaded))
    monkeypatch.setattr(registry, "_by_type", {})
    monkeypatch.setattr(registry, "_types_cache", [None, (np.ndarray,)])
    return strict_as_cupy.install()


def test_cupy_arrays_are_strict_arrays_owned_by_the_cupy_backend(fake_cupy):
    import cupy
    assert cupy is fake_cupy and backends.get("cupy").is_available()
    a = cupy.asarray(np.arange(4, dtype=np.float32))
    assert backends.get_backend(a).name == "cupy" and cuda.device_of(a) == "cuda:0"
    assert cuda.get_array_module(a) is cupy and isinstance(a, cupy.ndarray)
    with pytest.raises(TypeError, match="Implicit conversion to a NumPy array"):
        np.asarray(a)
    assert cupy.asnumpy(a * 2).tolist() == [0.0, 2.0, 4.0, 6.0]
    assert cupy.float32 is np.float32 and cupy.__version__.startswith("13")


def test_the_cupy_api_beyond_numpy(fake_cupy):
    import cupy
    import cupyx
    import cupyx.scipy.special as special
    target = cupy.zeros(3, dtype=np.float32)
    cupyx.scatter_add(target, cupy.asarray(np.array([0, 0, 2])), np.float32(1.0))
    assert cupy.asnumpy(target).tolist() == [2.0, 0.0, 1.0]
    assert float(special.erf(cupy.zeros(1))[0]) == 0.0
    pool = cupy.get_default_memory_pool()
    assert pool.used_bytes() >= target.nbytes and pool.n_free_blocks() == 0
    pool.free_all_blocks()
    with counters.count() as c:
        cupy.cuda.get_current_stream().synchronize()
        backends.get("cupy").synchronize()
    assert c.syncs == 2
    with cupy.cuda.Device(1):
        assert cuda.device_of(cupy.ones(2)) == "cuda:1"
    assert cupy.cuda.is_available() and cupy.cuda.runtime.getDeviceCount() == 1


def test_the_plugin_installs_at_configure(monkeypatch, fake_cupy):
    lines = []
    config = types.SimpleNamespace(addinivalue_line=lambda key, value: lines.append(key))
    monkeypatch.setattr(strict_as_cupy, "install", lambda: lines.append("installed"))
    strict_as_cupy.pytest_configure(config)
    assert lines == ["installed", "markers"]
