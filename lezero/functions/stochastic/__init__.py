"""Stochastic regularisers, the dropout family: dropout, dropout1d/2d/3d, alpha_dropout
(``dropouts``).  ``ScaleShift``, the constant affine map each of them is, is shared with
rrelu.  Masks come from the process generator, so ``lz.manual_seed`` reproduces them.
"""
from lezero.functions.stochastic.dropouts import *   # noqa: F401,F403
from lezero.functions.stochastic.dropouts import ScaleShift, __all__  # noqa: F401
