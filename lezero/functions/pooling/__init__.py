"""Pooling and resizing, with ``torch.nn.functional``'s names, arguments and defaults."""
from lezero.functions.pooling.max import *   # noqa: F401,F403
from lezero.functions.pooling.max import __all__  # noqa: F401
