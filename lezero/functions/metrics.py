"""Metrics (not differentiable): ``accuracy``."""
from lezero.core import Variable
from lezero.functions.common import xp_of
from lezero.functions.registry import register
from lezero.utils.checks import check_array

__all__ = ["accuracy"]


@register("metrics", differentiable=False, double_differentiable=False)
def accuracy(y, t):
    """The fraction of samples whose highest score is at the true class.

    ``y``: scores (logits or probabilities) of shape (N, C) or (N, C, d1, ...), classes on
    axis 1 as in ``cross_entropy``; ``t``: integer class indices of shape (N,) or
    (N, d1, ...).  Ties go to the lowest class index.  Returns a constant 0-dim Variable
    in ``y``'s floating dtype (float32 for integer scores).
    """
    scores = check_array("accuracy", "y", y)
    target = check_array("accuracy", "t", t)
    if scores.ndim < 2:
        raise ValueError(f"accuracy: y must have shape (N, C, ...), got shape {scores.shape}")
    if target.dtype.kind not in "iu":
        raise TypeError(f"accuracy: t must hold integer class indices, got dtype {target.dtype}")
    expected = scores.shape[:1] + scores.shape[2:]
    if target.shape != expected:
        raise ValueError(f"accuracy: t must have shape {expected} for y of shape "
                         f"{scores.shape}, got {target.shape}")
    if target.size == 0:
        raise ValueError(f"accuracy: empty batch (y has shape {scores.shape})")
    classes = scores.shape[1]
    lo, hi = int(target.min()), int(target.max())
    if lo < 0 or hi >= classes:
        raise ValueError(f"accuracy: class index {lo if lo < 0 else hi} is out of range for "
                         f"{classes} classes")
    xp = xp_of(scores)
    hits = scores.argmax(axis=1) == xp.asarray(target)
    dtype = scores.dtype if scores.dtype.kind == "f" else "float32"
    return Variable(hits.mean(dtype=dtype), requires_grad=False)
