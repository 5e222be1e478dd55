"""``DynamicBatcher``: single requests in, batches through the model, single answers out.

    batcher = DynamicBatcher(model, max_batch_size=32, max_delay_ms=5.0)
    future = batcher.submit(x)          # x: one sample, without the batch axis
    y = future.result()                 # model(stack([..., x, ...]))[i] for this x alone
    y = await batcher.submit_async(x)   # the same from a coroutine
    batcher.close()                     # serves what is queued, then stops

Any thread may submit.  One worker thread forms the batches (see ``queues`` for the
sending rules: full, preferred size, delay, shutdown) and calls ``fn`` on them under
``lz.no_grad()`` and ``lz.test_mode()``, so ``fn`` itself need not be thread-safe.
Each future is answered exactly once: with its slice of the output, with the model's
exception if its batch failed (the other batches are not affected), with
``RequestTimeoutError`` if it waited past its timeout, or ``BatcherClosedError`` if the
batcher was closed without draining.  A full queue refuses at once (``QueueFullError``);
``submit`` never blocks on the model.
"""
import asyncio
import concurrent.futures
import itertools
import threading
import time

from lezero.serving.errors import BatcherClosedError, QueueFullError
from lezero.serving.padding import Padding
from lezero.serving.queues import PendingQueue, Request
from lezero.serving.records import BatchStats
from lezero.serving.worker import Worker
from lezero.utils.checks import (check_array, check_callable, check_int, check_number,
                                 check_type, is_int)

__all__ = ["DynamicBatcher"]


def _as_inputs(x):
    """A sample as a tuple of arrays (one per model input)."""
    where = "DynamicBatcher.submit"
    if isinstance(x, (tuple, list)):
        if not x:
            raise ValueError(f"{where}: x is an empty {type(x).__name__}; give an array "
                             "or a tuple of arrays (one per model input)")
        return tuple(check_array(where, f"x[{i}]", a) for i, a in enumerate(x))
    return (check_array(where, "x", x),)


def _batch_key(inputs, pad_axis):
    """Requests with equal keys can be stacked (or padded) into one batch."""
    key = []
    for a in inputs:
        shape = list(a.shape)
        if pad_axis is not None:
            shape[pad_axis] = None
        key.append((type(a), a.dtype.str, tuple(shape)))
    return tuple(key)


def _check_preferred(where, sizes, max_batch_size):
    if sizes is None:
        return ()
    check_type(where, "preferred_batch_sizes", sizes, (list, tuple), "a list of ints")
    for s in sizes:
        if not is_int(s) or not 1 <= s <= max_batch_size:
            raise ValueError(f"{where}: preferred_batch_sizes must be ints in "
                             f"[1, max_batch_size={max_batch_size}], got {list(sizes)}")
    return tuple(sorted(set(int(s) for s in sizes)))


class DynamicBatcher(Worker):
    """Merge single requests into batches for ``fn`` (see the module docstring).

    fn: takes each input batch stacked on axis 0 (``fn(batch)``, ``fn(*batches)`` for
        tuple samples, and the mask last with ``padding``) and returns a batch (an array,
        a Variable, or a tuple/dict of them) whose axis 0 matches.
    max_batch_size, max_delay_ms: a batch is sent when full or when its oldest request
        has waited ``max_delay_ms`` (0: send whatever is there at once).
    max_queue_size: waiting requests beyond which ``submit`` raises ``QueueFullError``.
    preferred_batch_sizes: sizes sent as soon as they can be formed (Triton's knob).
    timeout_ms: default queue timeout of a request (None: wait as long as it takes).
    padding: a ``Padding`` for samples of different lengths (bucketing, mask, cut back).
    on_batch: called with each ``BatchRecord`` from the worker thread (metrics).
    record_limit: how many recent ``BatchRecord``s ``records`` keeps.
    """

    def __init__(self, fn, max_batch_size=32, max_delay_ms=5.0, max_queue_size=1024, *,
                 preferred_batch_sizes=None, timeout_ms=None, padding=None, on_batch=None,
                 record_limit=10000, name="batcher"):
        where = "DynamicBatcher"
        self.fn = check_callable(where, "fn", fn)
        self.max_batch_size = check_int(where, "max_batch_size", max_batch_size, low=1)
        self.max_delay_ms = check_number(where, "max_delay_ms", max_delay_ms, low=0)
        self.max_queue_size = check_int(where, "max_queue_size", max_queue_size, low=1)
        self.preferred_batch_sizes = _check_preferred(where, preferred_batch_sizes,
                                                      self.max_batch_size)
        self.timeout_ms = check_number(where, "timeout_ms", timeout_ms, low=0,
                                       low_open=True, allow_none=True)
        self.padding = check_type(where, "padding", padding, (Padding, type(None)),
                                  "a serving.Padding or None")
        self.on_batch = check_callable(where, "on_batch", on_batch, allow_none=True)
        self.name = check_type(where, "name", name, str)
        self._where = f"DynamicBatcher({name!r})"
        self._queue = PendingQueue(self.max_batch_size, self.max_delay_ms / 1000.0,
                                   self.preferred_batch_sizes)
        self._stats = BatchStats(check_int(where, "record_limit", record_limit, low=0))
        lock = threading.Lock()
        self._cond = threading.Condition(lock)        # wakes the worker
        self._timer = threading.Condition(lock)       # wakes the reaper of timeouts
        self._reaper = None
        self._seq = itertools.count()
        self._closing = False
        self._thread = threading.Thread(target=self._loop, name=f"lezero-{name}",
                                        daemon=True)
        self._thread.start()

    # ----- submitting ------------------------------------------------------------------
    def submit(self, x, priority=0, timeout_ms=None):
        """Queue one sample; returns a ``concurrent.futures.Future`` of its result.

        ``x``: an array (or Variable) without the batch axis, or a tuple of them for a
        model with several inputs.  ``priority``: a smaller number is served first (ties
        by arrival).  ``timeout_ms``: drop the request with ``RequestTimeoutError`` if it
        has not started within this time (default: the batcher's ``timeout_ms``).
        Raises ``QueueFullError`` at once when ``max_queue_size`` requests wait."""
        return self._enqueue([self._prepare(x, priority, timeout_ms)])[0]

    async def submit_async(self, x, priority=0, timeout_ms=None):
        """``await`` form of ``submit``: the result itself (or the exception raised).
        Cancelling the awaiting task cancels the request if it has not started."""
        return (await self.submit_many_async([x], priority, timeout_ms))[0]

    async def submit_many_async(self, xs, priority=0, timeout_ms=None):
        """Several samples (one request's rows), admitted all or none; returns their
        results in order.  The first failure is raised and the rest withdrawn.  A
        batch's answers reach the event loop in one wake-up (see ``delivery``)."""
        prepared = [self._prepare(x, priority, timeout_ms) for x in xs]
        loop = asyncio.get_running_loop()
        waiters = [(loop, loop.create_future()) for _ in prepared]
        futures = self._enqueue(prepared, waiters)
        try:
            return [await w for _, w in waiters]
        except BaseException:
            for f, (_, w) in zip(futures, waiters):
                f.cancel()                  # withdrawn if still queued
                w.cancel()                  # and nobody waits for its answer
            raise

    def _prepare(self, x, priority, timeout_ms):
        """One sample checked: ``(inputs, priority, timeout, length, key)``."""
        inputs = _as_inputs(x)
        priority = check_int("DynamicBatcher.submit", "priority", priority)
        timeout = self.timeout_ms if timeout_ms is None else check_number(
            "DynamicBatcher.submit", "timeout_ms", timeout_ms, low=0, low_open=True)
        pad = self.padding
        length = pad.length_of(inputs) if pad is not None else None
        key = _batch_key(inputs, None if pad is None else pad.axis) + (
            pad.bucket_of(length) if pad is not None else 0,)
        return inputs, priority, timeout, length, key

    def _enqueue(self, prepared, waiters=None):
        """Queue checked samples, all or none; returns their futures."""
        futures = [concurrent.futures.Future() for _ in prepared]
        with self._cond:
            if self._closing:
                raise BatcherClosedError(f"{self._where}: closed; no new requests")
            if self._queue.size + len(prepared) > self.max_queue_size:
                self._stats.count("rejected", len(prepared))
                raise QueueFullError(f"{self._where}: queue full ({self.max_queue_size} "
                                     "requests waiting); try again later")
            now, wake, timed = time.monotonic(), False, False
            for i, (inputs, priority, timeout, length, key) in enumerate(prepared):
                deadline = None if timeout is None else now + timeout / 1000.0
                wake |= self._queue.push(Request(
                    inputs, futures[i], priority, next(self._seq), now, deadline, length,
                    key, None if waiters is None else waiters[i]))
                timed |= deadline is not None
            self._stats.count("submitted", len(prepared))
            if wake:                        # only when the worker has a new decision
                self._cond.notify()
            if timed:
                self._start_reaper()
                self._timer.notify()
        return futures

    # ----- state -----------------------------------------------------------------------
    @property
    def queue_length(self):
        """Requests waiting (not counting the batch running now)."""
        return self._queue.size

    @property
    def records(self):
        """The most recent ``BatchRecord``s, oldest first."""
        return list(self._stats.records)

    def stats(self):
        """Totals: ``submitted``, ``rejected`` (queue full), ``completed``, ``failed``
        (model errors), ``expired`` (timeouts), ``cancelled``, ``pending``,
        ``in_flight``, ``batches``, ``reasons`` (batches per reason), ``padding_waste``
        and ``mean_batch_size``.  Every submitted request ends in exactly one of
        completed/failed/expired/cancelled."""
        return self._stats.snapshot(self._queue.size)

    @property
    def closed(self):
        return self._closing

    # ----- closing ---------------------------------------------------------------------
    def close(self, drain=True, timeout=None):
        """Refuse new requests; with ``drain`` serve every queued one first (without
        waiting for the delay), else fail them with ``BatcherClosedError``.  Waits for
        the worker (at most ``timeout`` seconds).  Safe to call twice."""
        with self._cond:
            self._closing = True
            dropped = [] if drain else self._queue.take_all()
            self._cond.notify_all()
            self._timer.notify_all()
        for req in dropped:
            self._fail(req, BatcherClosedError(f"{self._where}: closed without draining "
                                               "before this request ran"), "cancelled")
        deadline = None if timeout is None else time.monotonic() + timeout
        for thread in (self._thread, self._reaper):
            if thread is not None and thread is not threading.current_thread():
                thread.join(None if deadline is None else
                            max(deadline - time.monotonic(), 0))

    @property
    def running(self):
        """True while the worker thread is alive (after ``close``: still finishing a
        batch, e.g. a model call that hangs)."""
        return self._thread.is_alive()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return (f"DynamicBatcher({self.name!r}, max_batch_size={self.max_batch_size}, "
                f"max_delay_ms={self.max_delay_ms:g}, queued={self.queue_length})")
