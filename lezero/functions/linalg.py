"""Linear algebra, re-exported from three modules:

* ``linalg_product``: matmul, dot, tensordot, outer, linear (fused), bilinear;
* ``linalg_einsum``: einsum;
* ``linalg_solve``: inv, det, solve, cholesky.

Array operators follow NumPy (``dot``, ``tensordot``, ``einsum``, ``solve`` ...);
``linear`` and ``bilinear`` follow ``torch.nn.functional`` (weight is
``(out_features, in_features)``).
"""
from lezero.functions import linalg_einsum, linalg_product, linalg_solve
from lezero.functions.linalg_einsum import *    # noqa: F401,F403
from lezero.functions.linalg_product import *   # noqa: F401,F403
from lezero.functions.linalg_solve import *     # noqa: F401,F403
# The operator classes, for code that builds graphs from them directly.
from lezero.functions.linalg_product import Linear, MatMul, Tensordot  # noqa: F401

__all__ = linalg_product.__all__ + linalg_einsum.__all__ + linalg_solve.__all__
