"""``lezero.functions`` (imported as ``F``): every operator, one subpackage per family.

Array operators use NumPy's names and arguments; neural-network operators use
``torch.nn.functional``'s.  Each is registered in ``lezero.functions.registry``.  Every
family's ``__init__`` is its facade; this module re-exports them all, flat, in the order
the families build on each other (docs/architecture.md draws the map).
"""
from lezero.functions.math import *            # noqa: F401,F403
from lezero.functions.shape import *           # noqa: F401,F403
from lezero.functions.reduction import *       # noqa: F401,F403
from lezero.functions.linalg import *          # noqa: F401,F403
from lezero.functions.stochastic import *      # noqa: F401,F403
from lezero.functions.activation import *      # noqa: F401,F403
from lezero.functions.loss import *            # noqa: F401,F403
from lezero.functions.normalization import *   # noqa: F401,F403
from lezero.functions.embedding import *       # noqa: F401,F403
from lezero.functions.conv import *            # noqa: F401,F403
from lezero.functions.pooling import *         # noqa: F401,F403
from lezero.functions.attention import *       # noqa: F401,F403
from lezero.functions.rnn import *             # noqa: F401,F403
from lezero.functions.metrics import *         # noqa: F401,F403
from lezero.functions.aliases import *         # noqa: F401,F403  (cat, clamp: not counted)
from lezero.functions import variable_methods as _m    # noqa: E402

_m.install(__import__(__name__, fromlist=["*"]))
del _m
