"""Linear algebra, re-exported from four modules:

* ``product``: matmul, dot, tensordot, outer, linear (fused), bilinear;
* ``einsum``: einsum;
* ``solve``: inv, det, solve, cholesky;
* ``distance``: cosine_similarity, pairwise_distance.

Array operators follow NumPy (``dot``, ``tensordot``, ``einsum``, ``solve`` ...);
``linear``, ``bilinear`` and the distances follow ``torch.nn.functional`` (a weight
is ``(out_features, in_features)``; ``axis`` for PyTorch's ``dim``).
"""
from lezero.functions.linalg import (distance as _distance, einsum as _einsum,
                                     product as _product, solve as _solve)
from lezero.functions.linalg.distance import *         # noqa: F401,F403
from lezero.functions.linalg.einsum import *    # noqa: F401,F403
from lezero.functions.linalg.product import *   # noqa: F401,F403
from lezero.functions.linalg.solve import *     # noqa: F401,F403
# The operator classes, for code that builds graphs from them directly.
from lezero.functions.linalg.product import Linear, MatMul, Tensordot  # noqa: F401

__all__ = _product.__all__ + _einsum.__all__ + _solve.__all__ + _distance.__all__
