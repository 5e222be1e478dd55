"""Waits are bounded: a part that waits for a partner without a core spins briefly, then
sleeps, so its CPU time stays far below the time it waits; the barrier still holds every
part until all arrive."""
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from lezero import runtime
from lezero.runtime import lazyjit, scheduler, waits

pytestmark = pytest.mark.skipif(not lazyjit.numba_available(), reason="needs Numba")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LATE = 0.05         # the partner's delay: far beyond any spin bound


def _late_arrival(meeting, delay):
    def partner():
        time.sleep(delay)
        waits.arrive(meeting)
    t = threading.Thread(target=partner)
    t.start()
    return t


def test_a_meeting_with_a_late_partner_sleeps_instead_of_spinning():
    meeting = np.zeros(1, np.int64)
    waits.arrive_and_wait(np.zeros(1, np.int64), 1, 10)           # compiled before timing
    partner = _late_arrival(meeting, LATE)
    wall, cpu = time.perf_counter(), time.thread_time()
    slept = waits.arrive_and_wait(meeting, 2, runtime.policy.meet_spin_reads)
    wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
    partner.join()
    assert wall >= 0.9 * LATE and meeting[0] == 2 and slept
    assert cpu < 0.2 * wall, f"the waiter burnt {cpu * 1e3:.1f} ms of CPU in {wall * 1e3:.1f}"


def test_a_meeting_on_time_does_not_sleep():
    meeting = np.ones(1, np.int64)                                 # the partner is there
    assert not waits.arrive_and_wait(meeting, 2, 10)
    assert meeting[0] == 2


def test_the_join_sleeps_while_a_worker_is_late(threaded):
    scheduler.run_parts(lambda i: None, 2)                         # workers and kernels up
    wall, cpu = time.perf_counter(), time.thread_time()
    scheduler.run_parts(lambda i: time.sleep(LATE) if i == 1 else None, 2)
    wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
    assert wall >= 0.9 * LATE
    assert cpu < 0.2 * wall, f"the caller burnt {cpu * 1e3:.1f} ms of CPU in {wall * 1e3:.1f}"


def test_barrier_holds_every_part_until_all_arrive():
    numba = lazyjit.numba_module()
    lazyjit.load(waits)
    arrive, add, load = waits.arrive_and_wait, waits.atomic_add, waits.atomic_load

    @numba.njit(nogil=True)
    def rounds(k, meeting, slots, seen, n):
        for t in range(n):
            slots[k] = t + 1                      # my value for round t ...
            arrive(meeting, 4 * t + 2, 1000)
            seen[k, t] = slots[1 - k]             # ... the other's is there already
            add(meeting, 1)                       # nobody starts round t + 1 before I read
            while load(meeting) < 4 * t + 4:      # (compiled here: the intrinsics' code
                pass                              # generation runs in this process)

    n = 2000
    meeting, slots = np.zeros(1, np.int64), np.zeros(2, np.int64)
    seen = np.zeros((2, n), np.int64)
    th = threading.Thread(target=rounds, args=(1, meeting, slots, seen, n))
    th.start()
    rounds(0, meeting, slots, seen, n)
    th.join(timeout=60)
    assert not th.is_alive()
    np.testing.assert_array_equal(seen, np.tile(np.arange(1, n + 1), (2, 1)))
    assert meeting[0] == 4 * n


def test_run_meeting_gives_each_part_the_meeting_and_its_own_thread(threaded):
    seen = {}

    def part(i, meeting):
        seen[i] = threading.get_ident()
        waits.arrive_and_wait(meeting, 2, 1000)
        return int(meeting[0])
    assert scheduler.run_meeting(part, 2) == [2, 2]
    assert len(set(seen.values())) == 2


def test_sleep_is_available_here():
    assert waits.sleep_available()


def test_sleep_is_found_when_asked_before_any_kernel_compiled():
    """The LSTM asks first thing (``lstm_parts.parts_for``): a fresh process must say yes
    (it said no until Numba's JIT was set up, and the LSTM then never split)."""
    code = "from lezero.runtime import waits; print(waits.sleep_available())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, cwd=ROOT)
    assert out.stdout.strip() == "True", out.stderr
