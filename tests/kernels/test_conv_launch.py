"""conv_launch picks the parallel driver only for large work outside serial_kernels()."""
import threading

import pytest

from lezero.kernels import conv_launch as L


def _drivers(calls):
    def parallel(*args):
        calls.append(("parallel", args))
        return "p"

    def serial(*args):
        calls.append(("serial", args))
        return "s"
    return parallel, serial


@pytest.fixture
def two_threads(monkeypatch):
    monkeypatch.setattr(L._state, "pool", 2, raising=False)


def test_large_work_goes_to_the_pool(two_threads):
    calls = []
    assert L.launch(*_drivers(calls), L.SERIAL_BELOW, 4, "x") == "p"
    assert calls == [("parallel", ("x",))]


@pytest.mark.parametrize("work,planes", [(L.SERIAL_BELOW - 1, 4), (L.SERIAL_BELOW, 1)])
def test_small_work_or_one_plane_runs_serially_over_every_plane(two_threads, work, planes):
    calls = []
    assert L.launch(*_drivers(calls), work, planes, "x") == "s"
    assert calls == [("serial", ("x", 0, planes))]


def test_serial_kernels_block_forces_serial_and_restores(two_threads):
    calls = []
    with L.serial_kernels():
        assert L.serial_only()
        with L.serial_kernels():
            pass
        assert L.serial_only(), "a nested block must not end the outer one"
        assert L.launch(*_drivers(calls), L.SERIAL_BELOW, 4, "x") == "s"
    assert not L.serial_only()
    assert L.launch(*_drivers(calls), L.SERIAL_BELOW, 4, "x") == "p"


def test_serial_kernels_is_per_thread(two_threads):
    seen = []
    with L.serial_kernels():
        t = threading.Thread(target=lambda: seen.append(L.serial_only()))
        t.start()
        t.join()
    assert seen == [False]


def test_one_numba_thread_never_uses_the_pool(monkeypatch):
    monkeypatch.setattr(L._state, "pool", 1, raising=False)
    calls = []
    assert L.launch(*_drivers(calls), L.SERIAL_BELOW, 4, "x") == "s"


def test_pool_size_is_read_from_numba_once(monkeypatch):
    import numba
    monkeypatch.delattr(L._state, "pool", raising=False)
    assert L._pool_threads() == numba.config.NUMBA_NUM_THREADS
    monkeypatch.setattr(numba.config, "NUMBA_NUM_THREADS", 99)
    assert L._pool_threads() != 99          # cached on the thread
