"""Distances between vectors: ``cosine_similarity`` and ``pairwise_distance``, with
``torch.nn.functional``'s names, arguments and defaults (``axis`` for PyTorch's ``dim``).

Both broadcast ``x1`` against ``x2`` first, as PyTorch does, and are built from
differentiable operators (``norm``, ``clip``, ``sum``), so their gradients, and the
gradients of those, follow without a hand-written backward.

Where ``eps`` sits follows PyTorch 2.x:

* ``cosine_similarity`` clamps each norm from below by ``eps``:
  ``sum(x1 / max(||x1||, eps) * x2 / max(||x2||, eps))`` along ``axis``.  The values
  equal PyTorch's everywhere; so do the gradients wherever both norms exceed ``eps`` and
  for zero vectors.  For a nonzero norm below ``eps`` the gradient here is the
  derivative of the value (the clamped norm is a constant), while PyTorch's backward
  still differentiates the unclamped norm there.
* ``pairwise_distance`` adds ``eps`` to the difference: ``||x1 - x2 + eps||_p`` over
  the last axis of the broadcast shape.
"""
import math

import numpy as np

from lezero.functions.common import as_variable
from lezero.functions.math import abs, clip
from lezero.functions.reduction import norm
from lezero.functions.reduction import sum as sum_
from lezero.functions.registry import register
from lezero.functions.shape import broadcast_to, reshape
from lezero.utils.checks import check_axis, check_bool, check_float_array, check_real

__all__ = ["cosine_similarity", "pairwise_distance"]


def _check_pair(op, x1, x2):
    """Check two float inputs of one dtype that broadcast; return the broadcast shape."""
    a = check_float_array(op, "x1", x1)
    b = check_float_array(op, "x2", x2)
    if a.dtype != b.dtype:
        raise TypeError(f"{op}: x2 dtype {b.dtype} differs from x1 dtype {a.dtype}")
    try:
        return np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        raise ValueError(f"{op}: x1 of shape {a.shape} and x2 of shape {b.shape} do not "
                         f"broadcast together") from None


def _broadcast(x, shape):
    """``x`` as a Variable of ``shape`` (its gradient sums back to its own shape)."""
    x = as_variable(x)
    return x if x.shape == shape else broadcast_to(x, shape)


@register("linalg")
def cosine_similarity(x1, x2, axis=1, eps=1e-8):
    """Cosine of the angle between ``x1`` and ``x2`` along ``axis``, each norm clamped
    from below by ``eps``; the inputs broadcast, and ``axis`` indexes the broadcast shape,
    which loses that axis."""
    op = "cosine_similarity"
    shape = _check_pair(op, x1, x2)
    if not shape:
        raise ValueError(f"{op}: inputs must have at least 1 dim, got two 0-dim arrays")
    axis = check_axis(op, axis, len(shape))
    eps = check_real(op, "eps", eps)
    if not eps >= 0:
        raise ValueError(f"{op}: eps must be non-negative, got {eps}")
    a, b = _broadcast(x1, shape), _broadcast(x2, shape)
    a_unit = a / clip(norm(a, 2, axis, keepdims=True), eps)
    b_unit = b / clip(norm(b, 2, axis, keepdims=True), eps)
    return sum_(a_unit * b_unit, axis=axis)


def _p_norm_last(d, p, keepdim):
    """The p-norm of ``d`` over its last axis for any real ``p`` (0 counts nonzeros,
    +-inf take the largest/smallest magnitude, other p < 0 as PyTorch computes them)."""
    axis = d.ndim - 1
    if p >= 0 or p == -math.inf:
        return norm(d, p, axis=axis, keepdims=keepdim)
    return sum_(abs(d) ** p, axis=axis, keepdims=keepdim) ** (1.0 / p)


@register("linalg")
def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """``||x1 - x2 + eps||_p`` over the last axis of the broadcast shape (kept with length
    1 when ``keepdim``); ``p`` is any real number or +-inf, as in PyTorch."""
    op = "pairwise_distance"
    shape = _check_pair(op, x1, x2)
    p = check_real(op, "p", p)
    if math.isnan(p):
        raise ValueError(f"{op}: p must be a number or +-inf, got nan")
    eps = check_real(op, "eps", eps)
    keepdim = check_bool(op, "keepdim", keepdim)
    d = as_variable(x1) - as_variable(x2) + eps
    if not shape:              # two 0-dim inputs: the norm of one entry, a 0-dim result
        return reshape(_p_norm_last(reshape(d, (1,)), p, False), ())
    return _p_norm_last(d, p, keepdim)
