"""Reductions over ``axis`` with ``keepdims`` (NumPy names and arguments).

The family lives in four modules, re-exported here:

* ``reduction_basic`` sum mean var std logsumexp (and the shared argument helpers)
* ``reduction_prod``  prod cumsum cumprod (gradients exact at zeros)
* ``reduction_order`` max min argmax argmin all any topk
* ``reduction_norm``  norm

``axis`` is an int, a tuple of ints or None (all axes).  Where NumPy and PyTorch differ the
NumPy meaning is kept and the PyTorch one documented: ``var``/``std`` default to ``ddof=0``
(torch: ``correction=1``); ``max``/``min`` return values only (as ``torch.amax``), and tied
elements share the gradient evenly.
"""
from lezero.functions import reduction_basic, reduction_norm, reduction_order, reduction_prod
from lezero.functions.reduction_basic import *   # noqa: F401,F403
from lezero.functions.reduction_basic import Sum  # noqa: F401
from lezero.functions.reduction_norm import *    # noqa: F401,F403
from lezero.functions.reduction_order import *   # noqa: F401,F403
from lezero.functions.reduction_prod import *    # noqa: F401,F403

__all__ = (reduction_basic.__all__ + reduction_prod.__all__ + reduction_order.__all__
           + reduction_norm.__all__)
