"""``lezero.nn.functional`` is ``lezero.functions``, under the name PyTorch users import:

    import lezero.nn.functional as F        # or: from lezero.nn import functional as F

The same module object (not a copy), so ``F.relu is lezero.functions.relu``.
"""
import sys

import lezero.functions as _functions

sys.modules[__name__] = _functions
