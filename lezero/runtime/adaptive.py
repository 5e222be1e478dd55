"""Splitting a memory-bound kernel only while splitting is measured to be faster.

Whether two threads beat one on a pass over memory depends on the memory's state: with
the cache warm a split costs more than it saves, and in the spells when memory runs
several times slower one core cannot draw the bandwidth and a split halves the time
(the optimizer's update on the MLP benchmark: docs/performance.md, change 22).  So
``SplitWhenFaster`` keeps each way's last ``window`` timings in seconds per element,
runs the way with the lower minimum, and now and then the other (``Faster``: the less
often the slower it ran), to notice when the state changes.  The minimum, because noise
only ever adds time.
``lz.Config.split_when_faster = False`` makes every call one call; ``run_update`` is
the runner of the optimizers' updates (``kernels.axpy``).
"""
import collections
import time

from lezero.core import get_config
from lezero.runtime.settings import policy
from lezero.runtime import scheduler
from lezero.runtime.scheduler import on_range, same_length, threads_for
from lezero.utils.checks import check_int

__all__ = ["Faster", "SplitWhenFaster", "run_meeting", "run_update"]


class Faster:
    """Of a few ``ways`` to do the same work, the one whose recent timings (the last
    ``window`` per way, seconds per unit of work) have the lowest minimum (or, with
    ``median``, the lowest median).  The first call of each way runs untimed (it pays
    page faults, a library's first use, Numba's cache load), the second is its first
    timing.  Then another way is tried now and then, to notice when the machine's state
    changes: after ``explore`` calls times how many times slower that way last ran
    (at most ``MAX_SPACING``), so a try costs about 1/``explore`` of the time however
    slow the other way is.  The minimum where noise only ever adds time; the median
    where the noise is what is being chosen on (another process's load)."""

    MAX_SPACING = 16            # a way 16x slower or worse: tried every 16 * explore calls

    def __init__(self, ways, explore=None, window=None, name="Faster", median=False):
        self.ways, self.median = tuple(ways), median
        self.explore = check_int(name, "explore",
                                 policy.split_explore if explore is None else explore, low=2)
        window = check_int(name, "window",
                           policy.split_window if window is None else window, low=1)
        self.timings = {way: collections.deque(maxlen=window) for way in self.ways}
        self.calls, self.tried_at, self.tries = 0, 0, 0
        self.cold = set(self.ways)          # ways whose first (untimed) call is still due

    def cost(self, way):
        """The least seconds per unit of the last calls made ``way`` (None if none)."""
        t = self.timings[way]
        return (sorted(t)[len(t) // 2] if self.median else min(t)) if t else None

    def pick(self):
        """The way to run this call: each way twice first, then the cheapest, exploring."""
        self.calls += 1
        for way in self.ways:
            if not self.timings[way]:
                return way
        best = min(self.ways, key=self.cost)
        others = [way for way in self.ways if way != best]
        other = others[self.tries % len(others)]
        low = self.cost(best)
        spacing = self.MAX_SPACING if low <= 0 else \
            min(max(self.cost(other) / low, 1.0), self.MAX_SPACING)
        if self.calls - self.tried_at < self.explore * spacing:
            return best
        self.tried_at, self.tries = self.calls, self.tries + 1
        return other

    def timed(self, way, fn, work=1):
        """``fn()``, its time per unit of ``work`` kept as a timing of ``way`` (not the
        first call's)."""
        start = time.perf_counter()
        result = fn()
        if way in self.cold:
            self.cold.discard(way)
        else:
            self.timings[way].append((time.perf_counter() - start) / work)
        return result


class SplitWhenFaster(Faster):
    """One call or a split, whichever the recent timings of this runner say is faster
    (``min_part`` elements per part at least; ``explore`` and ``window`` default to the
    policy's ``split_explore`` and ``split_window``)."""

    def __init__(self, min_part, explore=None, window=None):
        self.min_part = check_int("SplitWhenFaster", "min_part", min_part, low=1)
        super().__init__((False, True), explore, window, name="SplitWhenFaster")

    def run(self, kernel, *arrays):
        """``kernel(*arrays)`` (1-D arrays of one length), in one call or split."""
        n = same_length("SplitWhenFaster.run", arrays)
        parts = threads_for(n, n, self.min_part)
        if parts == 1 or not get_config().split_when_faster:
            return kernel(*arrays)
        split = self.pick()
        self.timed(split, lambda: scheduler.run_split(on_range(kernel, arrays), n,
                                                      parts if split else 1), n)


_meetings = {}


def run_meeting(fn, count, key):
    """``fn(i, meeting, spins)`` for ``count`` parts that meet many times (the LSTM's
    steps): a meeting spins ``policy.meet_spin_reads`` reads before it sleeps, or sleeps
    at once, whichever the recent calls with this ``key`` measured faster.  Spinning
    pays on a quiet machine; while another process holds a core, a spinning part keeps
    its late partner waiting for that core (docs/performance.md, bounded waits).
    The median of each way's last five calls decides: under load a spinning meeting is
    now and then fast (when the other process is descheduled), and a minimum would follow
    those.  ``lz.Config.split_when_faster = False`` always spins first."""
    if not get_config().split_when_faster:
        return scheduler.run_meeting(lambda i, m: fn(i, m, policy.meet_spin_reads), count)
    chooser = _meetings.get(key)
    if chooser is None:
        if len(_meetings) >= 64:                    # shapes come and go: keep it bounded
            _meetings.clear()
        chooser = _meetings[key] = Faster(("spin", "sleep"), window=5, name="run_meeting",
                                          median=True)
    way = chooser.pick()
    spins = policy.meet_spin_reads if way == "spin" else 0
    return chooser.timed(way, lambda: scheduler.run_meeting(lambda i, m: fn(i, m, spins),
                                                            count))


_updates = {}


def run_update(kernel, *arrays):
    """An optimizer's in-place update ``kernel(*arrays)`` (1-D arrays of one length),
    split when measured faster, parts of at least ``policy.update_min_part_items``."""
    runner = _updates.get(policy.update_min_part_items)
    if runner is None:
        runner = _updates[policy.update_min_part_items] = SplitWhenFaster(
            policy.update_min_part_items)
    runner.run(kernel, *arrays)
