"""The worker threads that run the parts of a split kernel, and the join where they meet.

``scheduler.run_parts`` hands parts 1..n-1 to these workers and runs part 0 itself.  Each
worker has its own queue (``queue.SimpleQueue``: a ``put`` is a few microseconds, a
``concurrent.futures`` submit 24) and sleeps on it between calls.  A finished part counts
itself in a shared int64 counter (``waits.arrive``); the calling thread, done with part
0, spins on that counter with the GIL released for at most ``policy.spin_reads`` reads
(~0.1 ms), then sleeps on a semaphore that every part releases.  So a balanced call ends
within microseconds of its slowest part, and a worker that did not get a core costs a
short spin, not a busy core.

Workers are daemon threads made on first use and again after a fork (a child inherits
no running threads).  Without Numba the join only sleeps on the semaphore.
"""
import contextvars
import os
import queue
import threading

import numpy as np

from lezero.runtime.lazyjit import numba_available
from lezero.runtime.settings import policy
from lezero.runtime.waits import arrive, spin_until   # compiled on first call only

__all__ = ["Join", "submit", "queues"]

_lock = threading.Lock()
_state = {"queues": [], "pid": None}


def _worker(tasks):
    while True:
        _run(tasks.get())


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
    (results, errors) by index once all are done (slot 0 is the caller's)."""

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
            spin_until(self.arrived, self.count - 1, policy.spin_reads)
        for _ in range(self.count - 1):
            self.sleeper.acquire()
        return self.results, self.errors


def submit(fn, count, join):
    """Queue ``fn(i)`` for i in 1 .. count-1, one per worker, each run in a copy of the
    caller's context (its settings), reporting to ``join``."""
    for i, tasks in enumerate(queues(count - 1), start=1):
        tasks.put([contextvars.copy_context(), fn, i, join])


def _run(task):
    """Run one queued part.  What the part's function holds (the caller's arrays) is let
    go *before* ``join.done`` wakes the caller: a worker descheduled between the two would
    otherwise keep them alive after the call returned (tracemalloc saw them as kept)."""
    context, fn, i, join = task
    task.clear()
    try:
        result, error = context.run(fn, i), None
    except BaseException as caught:         # re-raised on the calling thread
        result, error = None, caught
    del fn, context
    join.done(i, result, error)
