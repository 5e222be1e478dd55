"""``launch`` picks Numba's pool only for large work, outside a part and in the default
profile; ``serial_kernels`` is per thread."""
import threading

import pytest

from lezero import runtime
from lezero.runtime import scheduler as S
from lezero.runtime import policy

BIG = policy.serial_below


def _drivers(calls):
    def parallel(*args):
        calls.append(("parallel", args))
        return "p"

    def serial(*args):
        calls.append(("serial", args))
        return "s"
    return parallel, serial


@pytest.fixture
def two_threads(monkeypatch, threaded):
    monkeypatch.setattr(S._local, "pool", 2, raising=False)
    with policy.using(threads=2):
        yield


def test_large_work_goes_to_the_pool(two_threads):
    calls = []
    assert S.launch(*_drivers(calls), BIG, 4, "x") == "p"
    assert calls == [("parallel", ("x",))]


@pytest.mark.parametrize("work,planes", [(BIG - 1, 4), (BIG, 1)])
def test_small_work_or_one_plane_runs_serially_over_every_plane(two_threads, work, planes):
    calls = []
    assert S.launch(*_drivers(calls), work, planes, "x") == "s"
    assert calls == [("serial", ("x", 0, planes))]


def test_the_threshold_is_the_policys(two_threads):
    calls = []
    with policy.using(serial_below=10):
        assert S.launch(*_drivers(calls), 10, 4, "x") == "p"
    assert S.launch(*_drivers(calls), 10, 4, "x") == "s"


def test_serial_kernels_block_forces_serial_and_restores(two_threads):
    calls = []
    with S.serial_kernels():
        assert S.serial_only()
        with S.serial_kernels():
            pass
        assert S.serial_only(), "a nested block must not end the outer one"
        assert S.launch(*_drivers(calls), BIG, 4, "x") == "s"
    assert not S.serial_only()
    assert S.launch(*_drivers(calls), BIG, 4, "x") == "p"


def test_the_serial_profile_runs_serially(two_threads):
    calls = []
    runtime.use_profile("serial")
    try:
        assert S.launch(*_drivers(calls), BIG, 4, "x") == "s"
    finally:
        runtime.use_profile("default")
    assert S.launch(*_drivers(calls), BIG, 4, "x") == "p"


def test_serial_kernels_is_per_thread(two_threads):
    seen = []
    with S.serial_kernels():
        t = threading.Thread(target=lambda: seen.append(S.serial_only()))
        t.start()
        t.join()
    assert seen == [False]


def test_one_numba_thread_never_uses_the_pool(monkeypatch, threaded):
    monkeypatch.setattr(S._local, "pool", 1, raising=False)
    calls = []
    assert S.launch(*_drivers(calls), BIG, 4, "x") == "s"


def test_pool_size_is_read_from_numba_once(monkeypatch):
    numba = pytest.importorskip("numba")
    monkeypatch.delattr(S._local, "pool", raising=False)
    assert S._pool_threads() == numba.config.NUMBA_NUM_THREADS
    monkeypatch.setattr(numba.config, "NUMBA_NUM_THREADS", 99)
    assert S._pool_threads() != 99          # cached on the thread


def test_one_runtime_thread_never_uses_the_pool(two_threads):
    """``OMP_NUM_THREADS=1`` (the runtime's one thread) holds for Numba's pool too."""
    calls = []
    with policy.using(threads=1):
        assert S.launch(*_drivers(calls), BIG, 4, "x") == "s"


def test_below_the_pool_work_with_a_part_size_goes_to_the_workers(two_threads):
    calls = []
    assert S.launch(*_drivers(calls), 1000, 4, "x", min_part=400) is None
    assert sorted(calls) == [("serial", ("x", 0, 2)), ("serial", ("x", 2, 4))]


@pytest.mark.parametrize("work,planes", [(700, 4), (1000, 1)])
def test_too_little_work_per_part_or_one_plane_stays_one_call(two_threads, work, planes):
    calls = []
    assert S.launch(*_drivers(calls), work, planes, "x", min_part=400) == "s"
    assert calls == [("serial", ("x", 0, planes))]


def test_inside_a_part_the_workers_are_not_asked_either(two_threads):
    calls = []
    with S.serial_kernels():
        assert S.launch(*_drivers(calls), 1000, 4, "x", min_part=1) == "s"
    assert calls == [("serial", ("x", 0, 4))]
