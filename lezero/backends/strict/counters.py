"""What the strict device counts: host round trips and the bytes its memory pool holds.

Every implicit wait for the device (``float()``, ``bool()``, ``.item()``) is a
*synchronization*; every copy of device data to host memory (``.get()``, ``to_host``,
scalar conversions, ``repr``) is a *device-to-host transfer*; every upload is a
*host-to-device transfer*.  Tests read the counts through ``count()``::

    with counters.count() as c:
        train_step()
    assert c.syncs == 1           # loss.item()

``trace=True`` also records, for each event, the first caller outside the backend
(``file:line``), so a failing count names the line that went to the host.
"""
import contextlib
import sys
import weakref

__all__ = ["Counts", "count", "record", "pool", "MemoryPool"]

_HERE = __name__.rsplit(".", 1)[0]


class Counts:
    """Event totals (``syncs``, ``d2h``, ``h2d``) and, when traced, their call sites."""

    def __init__(self, trace=False):
        self.syncs = self.d2h = self.h2d = 0
        self.trace = trace
        self.sites = []

    def __repr__(self):
        return f"Counts(syncs={self.syncs}, d2h={self.d2h}, h2d={self.h2d})"


_active = []            # the Counts being filled (nested count() blocks all see events)
totals = Counts()       # since the process started


def _site():
    frame = sys._getframe(2)
    while frame is not None and frame.f_globals.get("__name__", "").startswith(_HERE):
        frame = frame.f_back
    if frame is None:
        return "?"
    return f"{frame.f_code.co_filename}:{frame.f_lineno}"


def record(sync=0, d2h=0, h2d=0, what=""):
    """Count one event (called by the strict array and backend)."""
    for c in (totals, *_active):
        c.syncs += sync
        c.d2h += d2h
        c.h2d += h2d
        if c.trace:
            c.sites.append(f"{what} at {_site()}")


@contextlib.contextmanager
def count(trace=False):
    """Count the events inside the block into a fresh ``Counts``."""
    c = Counts(trace)
    _active.append(c)
    try:
        yield c
    finally:
        _active.remove(c)


class MemoryPool:
    """Bytes of the strict arrays that own their memory: in use now, at the peak, and
    allocated in all (what ``Backend.memory_stats()`` reports)."""

    def __init__(self):
        self.used_bytes = self.peak_bytes = self.total_bytes = self.n_allocs = 0

    def allocate(self, owner, nbytes):
        """Count ``nbytes`` until ``owner`` is collected."""
        self.used_bytes += nbytes
        self.total_bytes += nbytes
        self.n_allocs += 1
        self.peak_bytes = max(self.peak_bytes, self.used_bytes)
        weakref.finalize(owner, self._free, nbytes)

    def _free(self, nbytes):
        self.used_bytes -= nbytes

    def reset_peak(self):
        self.peak_bytes = self.used_bytes

    def stats(self):
        return {"used_bytes": self.used_bytes, "peak_bytes": self.peak_bytes,
                "total_allocated_bytes": self.total_bytes, "n_allocs": self.n_allocs}


pool = MemoryPool()
