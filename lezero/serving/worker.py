"""The worker side of a ``DynamicBatcher``: wait for a batch, run it, answer it.

One worker thread per batcher forms batches (``queues.PendingQueue`` decides when) and
calls the model; a second thread, started with the first request that has a timeout,
expires waiting requests on time even while the model runs.  Every request is answered
exactly once: with its row of the output, the model's exception, a timeout or a
closing error.
"""
import logging
import threading
import time

from lezero import cuda
from lezero.core import Variable, no_grad, test_mode
from lezero.serving.delivery import deliver
from lezero.serving.errors import RequestTimeoutError
from lezero.serving.padding import stack_samples
from lezero.serving.records import BatchRecord

__all__ = ["Worker", "split_outputs"]

_log = logging.getLogger("lezero.serving")


def split_outputs(result, n, where):
    """The model's result as a list of batch arrays, and a function that rebuilds one
    sample's result in the same structure (an array, a tuple or a dict)."""
    if isinstance(result, dict):
        keys = list(result)
        arrays, rebuild = [result[k] for k in keys], lambda parts: dict(zip(keys, parts))
    elif isinstance(result, (tuple, list)):
        arrays, rebuild = list(result), tuple
    else:
        arrays, rebuild = [result], lambda parts: parts[0]
    arrays = [a.data if isinstance(a, Variable) else a for a in arrays]
    for i, a in enumerate(arrays):
        if not isinstance(a, cuda.array_types()):
            raise TypeError(f"{where}: fn returned {type(a).__name__} as output {i}; "
                            "expected arrays or Variables (or a tuple/dict of them)")
        if a.ndim == 0 or a.shape[0] != n:
            raise ValueError(f"{where}: fn returned output {i} of shape {tuple(a.shape)} "
                             f"for a batch of {n}; its axis 0 must be the batch axis")
    return arrays, rebuild


class Worker:
    """The batcher's worker loop (a mixin: ``DynamicBatcher`` holds the state)."""

    def _start_reaper(self):
        """The thread that expires requests on time even while the model runs
        (started with the first request that has a timeout)."""
        if self._reaper is None:
            self._reaper = threading.Thread(target=self._reap, daemon=True,
                                            name=f"lezero-{self.name}-timeouts")
            self._reaper.start()

    def _fail(self, req, error, what):
        if req.future.set_running_or_notify_cancel():
            req.future.set_exception(error)
            deliver([req], error=error)
            self._stats.count(what)
        else:
            self._stats.count("cancelled")

    def _next(self):
        """Wait for work: ``(expired, batch, reason, done)``."""
        with self._cond:
            while True:
                now = time.monotonic()
                expired = self._queue.expire(now)
                batch, reason, wake = self._queue.next_batch(now, self._closing)
                done = batch is None and self._closing and self._queue.size == 0
                if expired or batch or done:
                    return expired, batch, reason, done
                self._cond.wait(None if wake is None else max(wake - now, 0.0))

    def _expire(self, expired):
        now = time.monotonic()
        for req in expired:
            waited = (now - req.arrival) * 1000.0
            self._fail(req, RequestTimeoutError(
                f"{self._where}: the request waited {waited:.1f} ms in the queue, "
                f"past its timeout of {(req.deadline - req.arrival) * 1000:.1f} ms"),
                "expired")

    def _loop(self):
        while True:
            expired, batch, reason, done = self._next()
            self._expire(expired)
            if batch:
                self._run_batch(batch, reason)
            if done:
                with self._timer:
                    self._timer.notify_all()    # let the reaper see the end
                return

    def _reap(self):
        while True:
            with self._timer:
                while True:
                    now = time.monotonic()
                    expired = self._queue.expire(now)
                    if expired or (self._closing and self._queue.size == 0):
                        break
                    deadline = self._queue.next_deadline()
                    self._timer.wait(None if deadline is None else max(deadline - now, 0))
            if not expired:
                return
            self._expire(expired)

    def _run_batch(self, batch, reason):
        live = [r for r in batch if r.future.set_running_or_notify_cancel()]
        if len(live) < len(batch):
            self._stats.count("cancelled", len(batch) - len(live))
        if not live:
            return
        start = time.monotonic()
        error, results, padded = None, None, 0
        try:
            results, padded = self._compute(live)
        except Exception as exc:        # the model's error fails this batch only
            error = exc
        end = time.monotonic()
        real = sum(r.length for r in live) if padded else len(live)
        record = BatchRecord(
            index=self._stats.counts["batches"], size=len(live), reason=reason,
            bucket=live[0].key[-1], padded_length=padded, real_positions=real,
            padded_positions=padded * len(live) if padded else len(live),
            max_wait_ms=(start - min(r.arrival for r in live)) * 1000.0,
            run_ms=(end - start) * 1000.0,
            error=None if error is None else f"{type(error).__name__}: {error}")
        self._stats.add(record)
        self._notify(record)
        if error is not None:
            for r in live:
                r.future.set_exception(error)
            deliver(live, error=error)
            self._stats.count("failed", len(live))
        else:
            for r, res in zip(live, results):
                r.future.set_result(res)
            deliver(live, results)
            self._stats.count("completed", len(live))

    def _notify(self, record):
        if self.on_batch is None:
            return
        try:
            self.on_batch(record)
        except Exception:               # a broken metrics hook must not stop serving
            _log.exception("%s: on_batch raised", self._where)

    def _compute(self, reqs):
        """Run ``fn`` on the requests' batch; returns (per-request results, padded
        length or 0)."""
        per_input = [[r.inputs[i] for r in reqs] for i in range(len(reqs[0].inputs))]
        pad, padded, extra = self.padding, 0, []
        if pad is None:
            batches = [stack_samples(s) for s in per_input]
        else:
            batches, mask, padded = pad.collate(per_input, [r.length for r in reqs],
                                                reqs[0].key[-1])
            extra = [mask] if pad.pass_mask else []
        with no_grad(), test_mode():
            result = self.fn(*batches, *extra)
        arrays, rebuild = split_outputs(result, len(reqs), self._where)
        results = []
        for i, r in enumerate(reqs):
            parts = [a[i] for a in arrays]
            if padded:
                parts = [pad.unpad(j, p, r.length, padded) for j, p in enumerate(parts)]
            results.append(rebuild([p.copy() for p in parts]))
        return results, padded
