"""run_parts on the worker threads: results in order, every part on its own thread with
BLAS and the kernels serial, errors raised after all parts ended, and a join that still
ends when a part outlasts the spin."""
import threading
import time

import numpy as np
import pytest

import lezero as lz
from lezero.runtime import blas, scheduler, workers


def test_results_come_back_in_part_order_each_part_on_its_own_thread(threaded):
    seen = {}

    def part(i):
        seen[i] = threading.get_ident()
        return i * 10
    assert scheduler.run_parts(part, 3) == [0, 10, 20]
    assert seen[0] == threading.get_ident()
    assert len(set(seen.values())) == 3


def test_parts_run_serial_kernels_with_the_callers_settings():
    def part(i):
        return scheduler.serial_only(), lz.Config.conv_threads
    with lz.using_config("conv_threads", 7):
        assert scheduler.run_parts(part, 2) == [(True, 7), (True, 7)]
    assert not scheduler.serial_only()          # the caller's flag comes back


@pytest.mark.skipif(not blas._blas_libs(), reason="needs threadpoolctl and OpenBLAS")
def test_parts_hold_blas_to_one_thread_and_restore_it(threaded):
    before = [c.get_num_threads() for c in blas._blas_libs()]
    counts = scheduler.run_parts(lambda i: [c.get_num_threads() for c in blas._blas_libs()],
                                 2)
    assert counts == [[1] * len(before)] * 2
    assert [c.get_num_threads() for c in blas._blas_libs()] == before


@pytest.mark.parametrize("failing", [0, 1])
def test_an_error_in_any_part_is_raised_after_every_part_ended(threaded, failing):
    ended = []

    def part(i):
        if i == failing:
            raise ValueError(f"part {i} failed")
        time.sleep(0.02)
        ended.append(i)
    with pytest.raises(ValueError, match=f"part {failing} failed"):
        scheduler.run_parts(part, 3)
    assert sorted(ended) == sorted({0, 1, 2} - {failing})
    assert scheduler.run_parts(lambda i: i, 3) == [0, 1, 2]     # the workers still serve


@pytest.mark.parametrize("spin", [True, False])
def test_a_part_that_outlasts_the_spin_is_still_waited_for(spin):
    with lz.runtime.policy.using(spin_reads=0):
        join = workers.Join(2)
        join.spin = spin and join.spin
        workers.submit(lambda i: time.sleep(0.05) or "late", 2, join)
        results, errors = join.wait()
    assert results == [None, "late"] and errors == [None, None]


def test_the_join_counts_arrivals_with_the_atomic_counter():
    if not lz.runtime.lazyjit.numba_available():
        pytest.skip("needs Numba")
    join = workers.Join(3)
    workers.submit(lambda i: i, 3, join)
    join.wait()
    assert join.arrived[0] == 2
    np.testing.assert_array_equal(join.results, [None, 1, 2])


def _split_in_child(queue):
    queue.put(scheduler.run_parts(lambda i: i + 1, 2))


@pytest.mark.timeout(60)
def test_a_forked_child_makes_its_own_workers(threaded):
    import multiprocessing
    scheduler.run_parts(lambda i: i, 2)              # the parent's workers exist
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    child = ctx.Process(target=_split_in_child, args=(q,))
    child.start()
    assert q.get(timeout=30) == [1, 2]
    child.join(30)
    assert child.exitcode == 0


def test_a_part_lets_go_of_its_function_before_it_wakes_the_caller():
    """What a part's function holds (the caller's arrays) is released before join.done:
    a worker descheduled right after waking the caller must not keep them alive."""
    import contextvars
    import gc
    import weakref

    from lezero.runtime import workers

    class Held:
        pass
    held = Held()
    alive_at_done = []

    class FakeJoin:
        def done(self, i, result, error):
            gc.collect()
            alive_at_done.append(ref() is not None)

    ref = weakref.ref(held)
    fn = (lambda box: (lambda i: box.__class__.__name__))(held)
    del held
    task = [contextvars.copy_context(), fn, 1, FakeJoin()]
    del fn
    workers._run(task)
    assert alive_at_done == [False] and task == []
