"""The hooks of ``Backend`` beyond its array namespace, checked on the backend under test."""
import numpy as np
import pytest

import lezero as lz
from lezero import cuda
from lezero.backends import base, get_backend

GENERATOR_METHODS = {m for m in dir(np.random.Generator) if not m.startswith("_")} - {
    "bit_generator", "spawn"}


def _random_bits(dtype, shape=(3, 5), seed=0):
    """An array of ``dtype`` with arbitrary bit patterns (NaN payloads, denormals)."""
    dtype = np.dtype(dtype)
    raw = np.random.default_rng(seed).integers(0, 256, (*shape, dtype.itemsize),
                                               dtype=np.uint8)
    if dtype.kind == "b":
        return raw[..., 0] % 2 == 1
    return raw.view(dtype).reshape(shape)


@pytest.mark.parametrize("dtype", base.ALL_DTYPES)
def test_round_trip_is_bitwise_for_declared_dtypes(backend, dtype):
    host = _random_bits(dtype)
    if dtype not in backend.capabilities.dtypes:
        with pytest.raises((TypeError, ValueError)):
            backend.from_host(host)
        return
    dev = backend.from_host(host)
    assert isinstance(dev, backend.array_types) and dev.shape == host.shape
    assert get_backend(dev) is backend
    back = backend.to_host(dev)
    assert type(back) is np.ndarray and back.dtype == host.dtype
    assert back.tobytes() == host.tobytes(), f"{dtype}: the bits changed on the round trip"
    if not backend.is_host:                      # device memory never aliases the host's
        host[...] = _random_bits(dtype, seed=1)
        assert backend.to_host(dev).tobytes() == back.tobytes()


def test_capabilities_are_consistent(backend):
    caps = backend.capabilities
    assert caps.default_float in caps.dtypes
    assert caps.float16 is False or "float16" in caps.dtypes


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_scatter_add_sums_repeated_indices_as_np_add_at(backend, dtype):
    if dtype not in backend.capabilities.dtypes:
        pytest.skip(f"{backend.name} holds no {dtype}")
    rng = np.random.default_rng(0)
    values = rng.standard_normal((7, 3)).astype(dtype)
    index = np.array([0, 2, 0, 4, 0, 2, 1])
    want = np.zeros((5, 3), dtype)
    np.add.at(want, index, values)
    target = backend.from_host(np.zeros((5, 3), dtype))
    out = backend.scatter_add(target, backend.from_host(index), backend.from_host(values))
    np.testing.assert_allclose(backend.to_host(target), want, rtol=1e-6)
    assert out is target


def test_scatter_add_takes_a_tuple_index(backend):
    dtype = backend.capabilities.default_float
    want = np.zeros((3, 4), dtype)
    rows, cols = np.array([0, 0, 2, 0]), np.array([1, 1, 3, 1])
    np.add.at(want, (rows, cols), np.float32(1.5))
    target = backend.from_host(np.zeros((3, 4), dtype))
    backend.scatter_add(target, (backend.from_host(rows), backend.from_host(cols)), 1.5)
    np.testing.assert_array_equal(backend.to_host(target), want)


def _draws(g):
    """Host copies of a few draws of each kind."""
    return [cuda.as_numpy(a) for a in (g.random(4), g.standard_normal(4),
                                       g.integers(0, 1000, size=4))]


def test_seeded_generators_repeat_and_seeds_differ(backend):
    a, b, c = _draws(backend.rng(123)), _draws(backend.rng(123)), _draws(backend.rng(124))
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    assert any(not np.array_equal(x, z) for x, z in zip(a, c))


def test_generator_has_exactly_the_declared_methods(backend):
    g = backend.rng(0)
    declared = set(backend.rng_methods) & GENERATOR_METHODS
    present = {m for m in GENERATOR_METHODS if hasattr(g, m)}
    assert present == declared, (f"undeclared: {sorted(present - declared)}, missing: "
                                 f"{sorted(declared - present)}")
    assert {"random", "integers", "standard_normal"} <= declared
    assert isinstance(g.random(3), backend.array_types)


def test_device_hooks(backend):
    with backend.device(0):
        a = backend.from_host(np.arange(4, dtype=backend.capabilities.default_float))
    assert isinstance(backend.device_of(a), str)
    assert cuda.get_array_module(a) is backend.xp
    assert cuda.get_array_module(lz.Variable(a)) is backend.xp
    assert backend.synchronize() is None
    stats = backend.memory_stats()
    assert isinstance(stats, dict) and all(isinstance(v, int) for v in stats.values())


def test_kernel_table_entries_are_callable(backend):
    for name in backend.kernels:
        assert callable(backend.kernels[name]), name
    assert backend.kernel("no such op", len) is len


def test_to_gpu_goes_to_the_default_device(on_device):
    v = lz.Variable(np.ones((2, 3), np.float32)).to_gpu()
    assert isinstance(v.data, on_device.array_types)
    m = lz.nn.Linear(3, 2).to_gpu()
    assert all(isinstance(p.data, on_device.array_types) for p in m.parameters())
    assert cuda.as_numpy(m(v).data).shape == (2, 2)
