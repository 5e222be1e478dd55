"""The worker threads that run the parts of a split kernel, with a join that spins.

``threads.run_parts`` hands parts 1..n-1 of a call to these workers and runs part 0
itself.  What a split costs was measured on a 1M-element update cut in two (2026-12-05):
with ``concurrent.futures`` the call took 236 us against 128 serial, because besides the
worker's wake-up (~30-45 us, a system call that no design without spinning workers
avoids) the calling thread slept in ``wait`` for the last part and took 60-80 us to wake
again.  Here each worker has its own queue (``queue.SimpleQueue``, whose ``put`` is a few
microseconds against ``submit``'s 24), and a finished part counts itself in a shared
int64 counter (``atomics.arrive``); the calling thread, done with part 0, spins on that
counter with the GIL released (``atomics.spin_until``) for up to ``SPIN_READS`` reads,
then sleeps on a semaphore that every part releases.  So a balanced call ends within
microseconds of its slowest part, and an unbalanced one (a worker that did not get a
core) costs a short spin, not a busy core.

Workers are daemon threads made on first use and again after a fork (a child inherits
no running threads).  Without Numba the join only sleeps on the semaphore.
"""
import contextvars
import functools
import os
import queue
import threading

import numpy as np

from lezero.kernels import numba_available
from lezero.kernels.atomics import arrive, spin_until   # compiled on first call only

SPIN_READS = 1 << 18        # ~0.3 ms of atomic reads before the join sleeps instead

_lock = threading.Lock()
_state = {"queues": [], "pid": None}


def _worker(tasks):
    while True:
        task = tasks.get()
        task()


def queues(n):
    """At least ``n`` workers' task queues (workers made as needed, anew after a fork)."""
    with _lock:
        if _state["pid"] != os.getpid():
            _state["queues"], _state["pid"] = [], os.getpid()
        while len(_state["queues"]) < n:
            q = queue.SimpleQueue()
            threading.Thread(target=_worker, args=(q,), daemon=True,
                             name=f"lezero-parts-{len(_state['queues'])}").start()
            _state["queues"].append(q)
        return _state["queues"][:n]


class Join:
    """Where the parts of one call meet: each worker part ``i`` (1 .. count-1) calls
    ``done(i, result, error)``; ``wait()``, on the calling thread, returns the parts'
    (results, errors) by index once all have called it (slot 0 is the caller's)."""

    def __init__(self, count):
        self.count = count
        self.results = [None] * count
        self.errors = [None] * count
        self.sleeper = threading.Semaphore(0)
        self.spin = numba_available()
        self.arrived = np.zeros(1, np.int64)

    def done(self, i, result, error):
        self.results[i], self.errors[i] = result, error
        # Release before counting: once the spinner sees the count, every acquire in
        # wait() finds its permit already there and does not sleep.
        self.sleeper.release()
        if self.spin:
            arrive(self.arrived)

    def wait(self):
        if self.spin:
            spin_until(self.arrived, self.count - 1, SPIN_READS)
        for _ in range(self.count - 1):
            self.sleeper.acquire()
        return self.results, self.errors


def submit(fn, count, join):
    """Queue ``fn(i)`` for i in 1 .. count-1, one per worker, each run in a copy of the
    caller's context (its settings), reporting to ``join``."""
    for i, tasks in enumerate(queues(count - 1), start=1):
        tasks.put(functools.partial(_run, contextvars.copy_context(), fn, i, join))


def _run(context, fn, i, join):
    try:
        result = context.run(fn, i)
    except BaseException as error:         # re-raised on the calling thread
        join.done(i, None, error)
    else:
        join.done(i, result, None)
