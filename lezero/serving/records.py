"""What a ``DynamicBatcher`` remembers: one record per batch and running totals."""
import collections
import dataclasses
import threading

__all__ = ["BatchRecord", "BatchStats"]

REASONS = ("full", "preferred", "delay", "shutdown")


@dataclasses.dataclass(frozen=True)
class BatchRecord:
    """One batch the batcher ran.

    ``reason`` says why it was sent: ``"full"`` (max_batch_size reached), ``"preferred"``
    (a preferred size was reached), ``"delay"`` (the oldest request waited max_delay_ms)
    or ``"shutdown"`` (drained by ``close``).  ``real_positions``/``padded_positions``
    count positions along the padded axis (equal when nothing was padded), so ``waste``
    is the fraction of the model's work spent on padding.  ``error`` is the model's
    exception as text when the batch failed, else None."""

    index: int
    size: int
    reason: str
    bucket: int
    padded_length: int
    real_positions: int
    padded_positions: int
    max_wait_ms: float
    run_ms: float
    error: str = None

    @property
    def waste(self):
        """The fraction of the batch's positions that are padding."""
        if not self.padded_positions:
            return 0.0
        return 1.0 - self.real_positions / self.padded_positions


class BatchStats:
    """Running totals over every batch (the records themselves are kept in a bounded
    window) and the request counts that prove none was lost or answered twice."""

    def __init__(self, record_limit):
        self._lock = threading.Lock()
        self.records = collections.deque(maxlen=record_limit)
        self.counts = dict.fromkeys(("submitted", "rejected", "completed", "failed",
                                     "expired", "cancelled", "batches"), 0)
        self.reasons = dict.fromkeys(REASONS, 0)
        self.real_positions = 0
        self.padded_positions = 0

    def count(self, what, n=1):
        with self._lock:
            self.counts[what] += n

    def add(self, record):
        with self._lock:
            self.records.append(record)
            self.counts["batches"] += 1
            self.reasons[record.reason] += 1
            self.real_positions += record.real_positions
            self.padded_positions += record.padded_positions

    def snapshot(self, pending):
        """A dict of the totals (see ``DynamicBatcher.stats``)."""
        with self._lock:
            out = dict(self.counts, pending=pending, reasons=dict(self.reasons),
                       real_positions=self.real_positions,
                       padded_positions=self.padded_positions)
        padded = out["padded_positions"]
        out["padding_waste"] = 1.0 - out["real_positions"] / padded if padded else 0.0
        answered = sum(out[k] for k in ("completed", "failed", "expired", "cancelled"))
        out["mean_batch_size"] = (out["completed"] + out["failed"]) / out["batches"] \
            if out["batches"] else 0.0
        out["in_flight"] = out["submitted"] - answered - pending
        return out
