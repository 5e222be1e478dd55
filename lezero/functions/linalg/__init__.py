"""Linear algebra, re-exported from four modules:

* ``product``: matmul, dot, tensordot, outer, linear (fused), bilinear;
* ``contraction``: einsum;
* ``matrix``: inv, det, solve, cholesky;
* ``distance``: cosine_similarity, pairwise_distance.

Array operators follow NumPy (``dot``, ``tensordot``, ``einsum``, ``solve`` ...);
``linear``, ``bilinear`` and the distances follow ``torch.nn.functional`` (a weight
is ``(out_features, in_features)``; ``axis`` for PyTorch's ``dim``).
"""
from lezero.functions.linalg import (contraction as _contraction, distance as _distance,
                                     matrix as _matrix, product as _product)
from lezero.functions.linalg.distance import *         # noqa: F401,F403
from lezero.functions.linalg.contraction import *    # noqa: F401,F403
from lezero.functions.linalg.product import *   # noqa: F401,F403
from lezero.functions.linalg.matrix import *     # noqa: F401,F403
# The operator classes, for code that builds graphs from them directly.
from lezero.functions.linalg.product import Linear, MatMul, Tensordot  # noqa: F401

__all__ = _product.__all__ + _contraction.__all__ + _matrix.__all__ + _distance.__all__
