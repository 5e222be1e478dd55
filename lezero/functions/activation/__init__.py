"""Activation functions, with ``torch.nn.functional``'s names, arguments and defaults."""
from lezero.functions.activation.piecewise import *   # noqa: F401,F403
from lezero.functions.activation.piecewise import __all__  # noqa: F401
