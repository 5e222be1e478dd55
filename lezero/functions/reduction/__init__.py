"""Reductions over ``axis`` with ``keepdims`` (NumPy names and arguments).

The family lives in four modules, re-exported here:

* ``basic`` sum mean var std logsumexp (and the shared argument helpers)
* ``prod``  prod cumsum cumprod (gradients exact at zeros)
* ``order`` max min argmax argmin all any topk
* ``norms`` norm
* ``sorting`` sort argsort

``axis`` is an int, a tuple of ints or None (all axes).  Where NumPy and PyTorch differ the
NumPy meaning is kept and the PyTorch one documented: ``var``/``std`` default to ``ddof=0``
(torch: ``correction=1``); ``max``/``min`` return values only (as ``torch.amax``), and tied
elements share the gradient evenly.
"""
from lezero.functions.reduction import (basic as _basic, norms as _norms, order as _order,
                                        prod as _prod, sorting as _sorting)
from lezero.functions.reduction.basic import *   # noqa: F401,F403
from lezero.functions.reduction.basic import Sum  # noqa: F401
from lezero.functions.reduction.norms import *    # noqa: F401,F403
from lezero.functions.reduction.order import *   # noqa: F401,F403
from lezero.functions.reduction.prod import *    # noqa: F401,F403
from lezero.functions.reduction.sorting import *  # noqa: F401,F403

__all__ = (_basic.__all__ + _prod.__all__ + _order.__all__ + _norms.__all__
           + _sorting.__all__)
