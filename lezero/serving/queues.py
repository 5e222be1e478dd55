"""The waiting room of a ``DynamicBatcher``: pending requests and the decision to send.

Requests that can share a batch -- same input shapes (but for the padded axis), same
dtypes, same length bucket -- form a *group*.  Inside a group requests are served by
``(priority, arrival)``: a smaller priority number first, then first come first served.
A group is *ready* when (checked in this order, as Triton's dynamic batcher does):

* ``full``: it holds ``max_batch_size`` requests;
* ``preferred``: it holds at least one of the preferred batch sizes (the largest such
  size is sent at once, the rest keep waiting);
* ``delay``: its oldest request has waited ``max_delay`` seconds;
* ``shutdown``: the batcher is closing and drains what is left without waiting.

Among ready groups the one whose best request ranks first is served.  Not thread-safe on
its own: the batcher holds its lock around every call.
"""
import collections
import heapq

__all__ = ["Request", "PendingQueue"]


class Request:
    """One submitted sample on its way through the batcher."""

    __slots__ = ("inputs", "future", "priority", "seq", "arrival", "deadline", "length",
                 "key", "waiter", "waiting")

    def __init__(self, inputs, future, priority, seq, arrival, deadline, length, key,
                 waiter=None):
        self.inputs, self.future, self.priority = inputs, future, priority
        self.seq, self.arrival, self.deadline = seq, arrival, deadline
        self.length, self.key = length, key
        self.waiter = waiter         # (event loop, asyncio future) for submit_async
        self.waiting = True          # False once taken into a batch, expired or cancelled


class _Group:
    """Requests that may share a batch: a heap by rank and a FIFO by arrival (for the
    delay, which counts from the oldest request).  Taken requests are skipped lazily."""

    __slots__ = ("heap", "fifo", "count")

    def __init__(self):
        self.heap, self.fifo, self.count = [], collections.deque(), 0

    def push(self, req):
        heapq.heappush(self.heap, (req.priority, req.seq, req))
        self.fifo.append(req)
        self.count += 1

    def oldest_arrival(self):
        while not self.fifo[0].waiting:
            self.fifo.popleft()
        return self.fifo[0].arrival

    def best_rank(self):
        while not self.heap[0][2].waiting:
            heapq.heappop(self.heap)
        return self.heap[0][:2]

    def pop(self, n):
        out = []
        while len(out) < n and self.heap:
            req = heapq.heappop(self.heap)[2]
            if req.waiting:
                req.waiting = False
                out.append(req)
        self.count -= len(out)
        return out


class PendingQueue:
    """Pending requests grouped by batch key, with the batcher's sending rules."""

    def __init__(self, max_batch_size, max_delay, preferred_batch_sizes=()):
        self.max_batch_size = max_batch_size
        self.max_delay = max_delay                 # seconds
        self.preferred = sorted(preferred_batch_sizes or ())
        self.groups = {}
        self.size = 0
        self._deadlines = []                       # heap of (deadline, seq, request)

    def push(self, req):
        """Queue a request; True when the worker must re-decide (a new group, with a
        delay of its own, or a group that just became ready)."""
        group = self.groups.get(req.key)
        if group is None:
            group = self.groups[req.key] = _Group()
        group.push(req)
        self.size += 1
        if req.deadline is not None:
            heapq.heappush(self._deadlines, (req.deadline, req.seq, req))
        n = group.count
        return n == 1 or n >= self.max_batch_size or n in self.preferred

    def _forget(self, key, n):
        self.size -= n
        if self.groups[key].count == 0:
            del self.groups[key]

    def expire(self, now):
        """Remove and return the waiting requests whose deadline has passed."""
        expired = []
        while self._deadlines and self._deadlines[0][0] <= now:
            req = heapq.heappop(self._deadlines)[2]
            if req.waiting:
                req.waiting = False
                self.groups[req.key].count -= 1
                self._forget(req.key, 1)
                expired.append(req)
        return expired

    def take_all(self):
        """Remove and return every waiting request (closing without draining)."""
        out = []
        for key in list(self.groups):
            out += self.groups[key].pop(self.size)
            self._forget(key, 0)
        self.size = 0
        self._deadlines.clear()
        return out

    def _decide(self, group, now, closing):
        """``(take, reason)`` if the group is ready, else ``(0, time it will be)``."""
        n = group.count
        if n >= self.max_batch_size:
            return self.max_batch_size, "full"
        fitting = [p for p in self.preferred if p <= n]
        if fitting:
            return fitting[-1], "preferred"
        due = group.oldest_arrival() + self.max_delay
        if now >= due:
            return n, "delay"
        if closing:
            return n, "shutdown"
        return 0, due

    def next_batch(self, now, closing):
        """``(requests, reason, None)`` for the batch to send now, or ``(None, None,
        wake_at)``: nothing is ready before ``wake_at`` (None: nothing is waiting)."""
        best, wake_at = None, None
        for key, group in self.groups.items():
            take, why = self._decide(group, now, closing)
            if take:
                rank = group.best_rank()
                if best is None or rank < best[0]:
                    best = (rank, key, take, why)
            elif wake_at is None or why < wake_at:
                wake_at = why
        if best is not None:
            _, key, take, why = best
            batch = self.groups[key].pop(take)
            self._forget(key, len(batch))
            return batch, why, None
        deadline = self.next_deadline()
        if deadline is not None and (wake_at is None or deadline < wake_at):
            wake_at = deadline
        return None, None, wake_at

    def next_deadline(self):
        """The earliest deadline of a waiting request (None when none has one)."""
        while self._deadlines and not self._deadlines[0][2].waiting:
            heapq.heappop(self._deadlines)
        return self._deadlines[0][0] if self._deadlines else None
