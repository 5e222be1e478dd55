"""Recurrence: cells, fused sequence operators, packed sequences."""
from lezero.functions.rnn.cells import *   # noqa: F401,F403
from lezero.functions.rnn.cells import __all__  # noqa: F401
