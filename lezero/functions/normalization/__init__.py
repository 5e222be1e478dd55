"""Normalization operators, with ``torch.nn.functional``'s names, arguments and defaults."""
from lezero.functions.normalization.operators import *   # noqa: F401,F403
from lezero.functions.normalization.operators import __all__  # noqa: F401
