"""The strict device refuses what CuPy refuses, counts what costs a host round trip, and
otherwise computes what NumPy computes."""
import copy
import pickle

import numpy as np
import pytest

from lezero import backends
from lezero.backends.strict import StrictArray, counters

xp = backends.get("strict").xp


def dev(a):
    return xp.asarray(np.asarray(a))


def test_not_an_ndarray_and_no_implicit_route_to_host():
    a = dev([1.0, 2.0])
    assert not isinstance(a, np.ndarray) and isinstance(a, xp.ndarray)
    with pytest.raises(TypeError, match="Implicit conversion to a NumPy array"):
        np.asarray(a)
    for attr in ("__array_interface__", "__array_struct__", "__dlpack__", "data", "ctypes"):
        assert not hasattr(a, attr), attr
    with pytest.raises(TypeError):
        memoryview(a)
    with pytest.raises((TypeError, AttributeError)):
        np.from_dlpack(a)


def test_host_operands_are_refused_scalars_are_fine():
    a = dev([1.0, 2.0])
    with pytest.raises(TypeError, match="host numpy.ndarray"):
        a + np.ones(2)
    with pytest.raises(TypeError, match="host numpy.ndarray"):
        np.ones(2) * a
    with pytest.raises(TypeError, match="host numpy.ndarray"):
        xp.concatenate([a, np.ones(2)])
    with pytest.raises(TypeError, match="__setitem__"):
        a[...] = np.ones(2)
    out = a * 2.0 + np.float32(1) - np.array(0.5)
    assert isinstance(out, StrictArray) and out.get().tolist() == [2.5, 4.5]


def test_numpy_functions_dispatch_and_return_device_arrays():
    a = dev(np.arange(6.0).reshape(2, 3))
    for result in (np.exp(a), np.sum(a, axis=0), np.concatenate([a, a]), a.T @ a,
                   np.where(a > 2, a, 0), xp.zeros((2, 2)), xp.linalg.norm(a)):
        assert isinstance(result, StrictArray)
    parts = np.split(a, 3, axis=1)
    assert [type(p) for p in parts] == [StrictArray] * 3
    np.testing.assert_array_equal(np.sum(a, axis=0).get(), [3.0, 5.0, 7.0])


def test_reductions_and_scalar_indexing_are_0d_device_arrays():
    a = dev([[1.0, 2.0], [3.0, 4.0]])
    for r in (a.sum(), a[1, 0], a.max(), np.mean(a), a.argmax()):
        assert isinstance(r, StrictArray) and r.shape == ()
    assert [type(row) for row in a] == [StrictArray, StrictArray]


def test_scalar_conversions_and_get_are_counted():
    a = dev([1.0, 2.0, 3.0])
    with counters.count(trace=True) as c:
        s = a.sum()
        assert float(s) == 6.0 and int(s) == 6 and bool(s) and s.item() == 6.0
        host = a.get()
        repr(a)
    assert (c.syncs, c.d2h, c.h2d) == (6, 6, 0)
    assert type(host) is np.ndarray and "test_strict_array.py" in c.sites[0]
    with counters.count() as c:
        b = xp.asarray(np.ones(3))
        b[np.array([0, 1])] += 1.0
    assert (c.syncs, c.h2d) == (0, 3)      # the upload, and the host index read and written


def test_ufunc_at_only_where_cupy_has_it():
    a = xp.zeros(3)
    idx = dev([0, 0, 2])
    np.add.at(a, idx, 1.0)
    xp.maximum.at(a, idx, 5.0)
    assert a.get().tolist() == [5.0, 0.0, 5.0]
    with pytest.raises(TypeError, match="multiply.at does not exist on CuPy"):
        np.multiply.at(a, idx, 2.0)
    with pytest.raises(AttributeError, match="multiply.at"):
        xp.multiply.at


def test_out_and_in_place_keep_the_device_array():
    a = dev([1.0, 2.0])
    b = a
    a += 1.0
    assert a is b and a.get().tolist() == [2.0, 3.0]
    out = xp.empty(2)
    assert np.add(a, a, out=out) is out and out.get().tolist() == [4.0, 6.0]


def test_views_share_memory_and_know_their_base():
    a = dev(np.arange(6.0))
    v = a[2:4]
    v[...] = 0.0
    assert a.get().tolist() == [0.0, 1.0, 0.0, 0.0, 4.0, 5.0]
    assert v.base is a and a.base is None
    assert a.reshape(2, 3).T.base is a


def test_generator_has_cupys_methods_only():
    g = xp.random.default_rng(0)
    x = g.standard_normal((2, 3), dtype=np.float32)
    assert isinstance(x, StrictArray) and x.dtype == np.float32
    assert isinstance(g.integers(0, 5), StrictArray)
    for missing in ("normal", "uniform", "choice", "permutation", "shuffle"):
        with pytest.raises(AttributeError, match=missing):
            getattr(g, missing)
    out = xp.empty(3)
    assert g.random(3, out=out) is out
    state = g.state
    first = g.random(2).get()
    g.state = state
    np.testing.assert_array_equal(g.random(2).get(), first)
    assert isinstance(xp.random.randn(2), StrictArray)


def test_memory_pool_counts_bytes_until_collected():
    pool = counters.pool
    before = pool.used_bytes
    a = xp.zeros(1000, dtype=np.float64)
    assert pool.used_bytes - before == 8000 and pool.peak_bytes >= pool.used_bytes
    del a
    assert pool.used_bytes == before
    stats = backends.get("strict").memory_stats()
    assert stats["used_bytes"] == before and stats["n_allocs"] > 0


def test_pickle_and_copy_stay_on_the_device():
    a = dev([1.0, 2.0])
    for b in (pickle.loads(pickle.dumps(a)), copy.copy(a), copy.deepcopy(a)):
        assert isinstance(b, StrictArray) and b.get().tolist() == [1.0, 2.0]
        assert b is not a


def test_unknown_attributes_and_names_are_errors():
    with pytest.raises(AttributeError, match="tobytes"):
        dev([1.0]).tobytes()
    with pytest.raises(AttributeError, match="strict"):
        xp.no_such_function
    assert xp.get_array_module(dev([1])) is xp and xp.get_array_module(1.0) is np
    assert xp.asnumpy(dev([3])).tolist() == [3] and xp.asnumpy([1]).tolist() == [1]
    assert xp.float32 is np.float32 and xp.pi == np.pi


def test_device_context():
    b = backends.get("strict")
    with b.device(1) as d:
        a = dev([1.0])
        assert a.device.id == 1 and d == a.device
    assert b.device_of(dev([1.0])) == "strict:0"
    with counters.count() as c:
        b.synchronize()
        a.device.synchronize()
    assert c.syncs == 2
