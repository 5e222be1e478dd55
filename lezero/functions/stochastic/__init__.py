"""Stochastic regularisers: the dropout family."""
from lezero.functions.stochastic.dropout import *   # noqa: F401,F403
from lezero.functions.stochastic.dropout import ScaleShift, __all__  # noqa: F401
