"""``Request``: a communication in flight, and the one waiting loop every wait goes through.

Every operation of a ``Communicator`` starts as a non-blocking MPI request; blocking calls
wait on it here.  Waiting polls ``Test`` against a deadline: for the first 5 ms without
sleeping (MPI's rendezvous protocols need both sides to poll; between polls it yields the
core to any other runnable process), then with sleeps that grow to 1 ms, so a rank that
waits long leaves the CPU to ranks that compute (mpiexec puts several ranks on one core
at times).  Past the deadline the wait prints a stall report
(which ranks have not arrived at this operation, see ``stall.py``) and raises
``CollectiveTimeoutError``; while waiting it answers the stall queries of other ranks.
"""
import os
import time

__all__ = ["Request", "CollectiveTimeoutError", "wait_all"]

_SPIN_S = 5e-3         # poll without sleeping this long (yielding the core when asked)
_MAX_SLEEP = 1e-3      # then sleep between polls, growing to this


class CollectiveTimeoutError(TimeoutError):
    """A communication waited longer than its communicator's ``timeout``; the message is
    the stall report (which ranks had not arrived, at which operation)."""


class Request:
    """An operation in flight: ``test()`` (done yet?) and ``wait()`` (its result).

    ``wait()`` returns the operation's result -- the reduced or received array -- and
    may be called again (it returns the same array).  ``completed_at`` is the
    ``time.perf_counter()`` at which completion was first seen (None before).
    """

    __slots__ = ("_raw", "_finish", "_result", "_done", "tracker", "seq", "what", "peer",
                 "completed_at", "started_at")

    def __init__(self, raw, finish=None, tracker=None, seq=None, what="operation", peer=None):
        self._raw = raw                # an mpi4py Request, or None when already complete
        self._finish = finish          # result = finish(): copy back, divide, cast
        self._result = None
        self._done = False
        self.tracker, self.seq, self.what = tracker, seq, what
        self.peer = peer               # the other rank of a send or receive (None: all)
        self.started_at = time.perf_counter()
        self.completed_at = None
        if raw is None:
            self._complete()

    def _complete(self):
        self._done = True
        self.completed_at = time.perf_counter()
        verify = getattr(self._raw, "verify", None)
        if verify is not None:         # a checked receive: the header must match
            try:
                verify()
            except Exception:
                self._finish = None
                raise
        if self._finish is not None:
            self._result = self._finish()
            self._finish = None

    def test(self):
        """True once the operation has completed (runs no wait, never blocks)."""
        if not self._done and self._raw.Test():
            self._complete()
        return self._done

    @property
    def op(self):
        """The operation's name ("allreduce", "recv", ...)."""
        return self.what.split(" ")[0]

    @property
    def label(self):
        """``what`` with the collective's number: "allreduce #3 (bucket 1 of 2)"."""
        if self.seq is None:
            return self.what
        return f"{self.op} #{self.seq}{self.what[len(self.op):]}"

    @property
    def done(self):
        return self._done

    def wait(self, timeout=None):
        """Block until complete and return the result; past ``timeout`` seconds (default:
        the communicator's) print a stall report and raise ``CollectiveTimeoutError``."""
        if not self._done:
            wait_all([self], timeout)
        return self._result

    def __repr__(self):
        state = "done" if self._done else "in flight"
        return f"<Request {self.what} {state}>"


def _timeout_of(requests, timeout):
    if timeout is not None:
        return float(timeout)
    found = [r.tracker.timeout for r in requests if r.tracker is not None]
    return min(found) if found else float("inf")


def wait_all(requests, timeout=None, on_complete=None):
    """Wait for every request; ``on_complete(request)`` is called as each one finishes
    (data parallelism timestamps buckets with it).  Raises ``CollectiveTimeoutError``
    with a stall report naming the first unfinished request past the deadline."""
    pending = [r for r in requests if not r.done]
    if on_complete is not None:
        for r in requests:
            if r.done:
                on_complete(r)
    if not pending:
        return
    limit = _timeout_of(pending, timeout)
    start = time.perf_counter()
    trackers = {r.tracker for r in pending if r.tracker is not None}
    for t in trackers:     # what a stall query from another rank is told we wait for
        t.waiting = (pending[0].label, start)
    try:
        _poll(pending, limit, start, on_complete)
    finally:
        for t in trackers:
            t.waiting = None


def _poll(pending, limit, start, on_complete):
    spins, sleep = 0, 2e-5
    spin_until = start + _SPIN_S
    while pending:
        still = []
        for r in pending:
            if r.test():
                if on_complete is not None:
                    on_complete(r)
            else:
                still.append(r)
        pending = still
        if not pending:
            return
        spins += 1
        now = time.perf_counter()
        if now < spin_until:          # a message protocol needs both sides to poll: stay
            if spins > 50:            # close, but let other runnable processes have the core
                os.sched_yield()
            continue
        from lezero.parallel import lifecycle, stall
        stall.service_all()
        lifecycle.poll(pending)
        waited = now - start
        if waited > limit:
            raise CollectiveTimeoutError(stall.report(pending[0], waited))
        time.sleep(sleep)
        sleep = min(sleep * 2, _MAX_SLEEP)
