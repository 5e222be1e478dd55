"""``UseCounter``: drop a parameter's low-precision copy right after its last use in forward.

An autocast region caches one float16 copy per parameter (``amp.copies.ParamCopy``) and
used to drop them all when the region ended, so at the end of a forward every copy was
alive at once (208 MiB for BERT-base, on top of the activations).  A weight is usually
read a fixed number of times per step (once; twice when tied; once per time step in an
RNN built from cells), so each region counts the reads of every parameter's copy, and the
next region drops a copy's array right after the Function that makes its last expected
read has run.  Backward casts it again when it needs it, exactly as it does after the
region ends, so gradients are bit for bit the same.

A count is a guess about the next step, never a promise: a read beyond it finds the same
``ParamCopy`` in the cache, whose array is then cast again on demand (``ParamCopy.data``)
and kept to the end of the region; the region's new count replaces the old one.  The first
region of a parameter drops nothing early.  Copies made under ``no_grad`` are plain
Variables, not ``ParamCopy``, and stay cached to the end of the region.
"""
import weakref

from lezero.amp.copies import ParamCopy, drop

__all__ = ["UseCounter"]

# id(parameter) -> (a weak reference to it, how many times the last region that ended read
# its copy).  Not a WeakKeyDictionary: that compares keys with ==, elementwise for Variables.
_LAST_COUNT = {}


def _expected(param):
    entry = _LAST_COUNT.get(id(param))
    return entry[1] if entry is not None and entry[0]() is param else None


def _remember(param, n):
    key = id(param)
    _LAST_COUNT[key] = (weakref.ref(param, lambda _, key=key: _LAST_COUNT.pop(key, None)), n)


class UseCounter:
    """One region's reads of parameter copies, and the copies due to be dropped."""

    __slots__ = ("counts", "params", "due")

    def __init__(self):
        self.counts = {}        # id(parameter) -> reads of its copy in this region
        self.params = {}        # id(parameter) -> the parameter (alive for the region)
        self.due = {}           # id(function) -> copies to drop once that function has run

    def use(self, param, copy, function):
        """Count a read of ``copy`` (a cast of ``param``) by ``function``; returns ``copy``.
        The read the last region ended with schedules the drop."""
        if type(copy) is not ParamCopy:
            return copy
        key = id(param)
        n = self.counts[key] = self.counts.get(key, 0) + 1
        self.params[key] = param
        if n == _expected(param):
            self.due.setdefault(id(function), []).append(copy)
        return copy

    def after(self, function):
        """``function``'s forward has run: drop the copies whose last read it made."""
        if self.due:
            for copy in self.due.pop(id(function), ()):
                drop(copy)

    def learn(self):
        """The region ends: its counts become the next region's expectations."""
        for key, n in self.counts.items():
            param = self.params[key]
            if _expected(param) != n:
                _remember(param, n)
        self.counts.clear()
        self.params.clear()
        self.due.clear()
