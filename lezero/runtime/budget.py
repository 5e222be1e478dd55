"""The memory budget of what trades memory for speed.

An operator may keep for backward an array it could recompute there: a convolution's
transformed input (Winograd tiles, im2col columns) or transformed filter.  Keeping it
saves time and costs memory, so it is kept only inside ``policy.transform_cache_bytes``,
the bytes all such arrays alive in the process may hold at once (0: never keep).  The
default lets small networks keep their transforms (LeNet's, a benchmark layer's) while a
real-size model's training step stays at the memory of what backward cannot recompute.

``reserve(nbytes)`` returns a ``Reservation`` (or None when it does not fit); it counts
while it lives, so an operator stores it beside the array and both go together.
"""
import threading

from lezero.runtime.settings import policy

__all__ = ["reserve", "in_use", "room", "Reservation"]

policy.define("transform_cache_bytes", 32 << 20,
              "bytes of recomputable transforms kept for backward, process-wide (conv)")

_lock = threading.RLock()       # re-entrant: a Reservation may die inside reserve()
_used = [0]


class Reservation:
    """``nbytes`` of the budget, given back when this object is freed."""

    __slots__ = ("nbytes",)

    def __init__(self, nbytes):
        self.nbytes = nbytes

    def __del__(self):
        with _lock:
            _used[0] -= self.nbytes


def reserve(nbytes):
    """A Reservation of ``nbytes`` if they fit in the budget now, else None."""
    nbytes = int(nbytes)
    with _lock:
        if _used[0] + nbytes > policy.transform_cache_bytes:
            return None
        _used[0] += nbytes
    return Reservation(nbytes)


def in_use():
    """Bytes reserved now (the transforms kept for backward in the whole process)."""
    return _used[0]


def room():
    """Bytes a ``reserve`` could still get now."""
    return max(0, policy.transform_cache_bytes - _used[0])
