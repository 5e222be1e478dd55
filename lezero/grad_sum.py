"""``add_grads``: the backward pass's sum of two gradients of one Variable, in place when
nobody else can see the running total.

A Variable used twice (a residual stream, a tied embedding) receives two gradients, and
``a + b`` allocates a third array while both are alive: 3 x 147 MiB for GPT-2's tied
50257x768 embedding at the end of backward.  When the total's Variable and its array are
held by the pass alone, the sum is written into the total instead (``a += b`` gives the
bits of ``a + b``), so only two arrays are ever alive.

"Held by the pass alone" is checked, not assumed: a backward may return one Variable for
two inputs (``Add.backward``: ``gy, gy``), or an array that is also an upstream gradient,
someone's ``.grad`` or a saved array.  The total is summed into only if its Variable has
no reference beyond the pass's table and the calls that carry it, and its array none
beyond that Variable; the array must own its memory (``base`` None, and nothing views it,
since a view holds its base), be a writeable NumPy array, and have the other gradient's
dtype and shape.  The reference counts meaning "the pass alone" are measured once,
through calls shaped like the engine's (``_calibrate``), rather than written down.
"""
import sys

import numpy as np

from lezero.core.variable import Variable

__all__ = ["add_grads"]


def add_grads(total, g):
    """``total + g`` for two first-order gradient Variables of one Variable: ``total``
    itself, updated in place, when the pass is its only holder; else a new Variable."""
    a, b = total.data, g.data
    if (type(a) is np.ndarray and a.base is None and a.dtype == b.dtype
            and a.shape == b.shape and a.flags.writeable
            and sys.getrefcount(total) <= _ALONE[0] and sys.getrefcount(a) <= _ALONE[1]):
        a += b
        return total
    return Variable(a + b, None, False)     # positional: faster than keywords


def _counts(total):
    """The reference counts ``add_grads`` sees, taken in a frame of its shape."""
    a = total.data
    return sys.getrefcount(total), sys.getrefcount(a)


def _engine_add(total, g):
    """Stands for ``lezero.core.backward._add``, the caller of ``add_grads``."""
    return _counts(total)


def _calibrate():
    """The counts for a total held only by the engine's table (a dict) and the local the
    engine reads it into, passed through ``_add`` to ``add_grads``."""
    table = {0: Variable(np.zeros(1, np.float32), None, False)}
    total = table[0]
    return _engine_add(total, None)


_ALONE = _calibrate()
