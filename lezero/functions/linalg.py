"""Linear algebra, re-exported from four modules:

* ``linalg_product``: matmul, dot, tensordot, outer, linear (fused), bilinear;
* ``linalg_einsum``: einsum;
* ``linalg_solve``: inv, det, solve, cholesky;
* ``distance``: cosine_similarity, pairwise_distance.

Array operators follow NumPy (``dot``, ``tensordot``, ``einsum``, ``solve`` ...);
``linear``, ``bilinear`` and the distances follow ``torch.nn.functional`` (a weight
is ``(out_features, in_features)``; ``axis`` for PyTorch's ``dim``).
"""
from lezero.functions import distance, linalg_einsum, linalg_product, linalg_solve
from lezero.functions.distance import *         # noqa: F401,F403
from lezero.functions.linalg_einsum import *    # noqa: F401,F403
from lezero.functions.linalg_product import *   # noqa: F401,F403
from lezero.functions.linalg_solve import *     # noqa: F401,F403
# The operator classes, for code that builds graphs from them directly.
from lezero.functions.linalg_product import Linear, MatMul, Tensordot  # noqa: F401

__all__ = (linalg_product.__all__ + linalg_einsum.__all__ + linalg_solve.__all__
           + distance.__all__)
