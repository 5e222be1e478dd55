"""``embedding``: look up rows of a weight matrix by integer index (PyTorch semantics).

The gradient scatter-adds each output row's gradient into the row it was read from, so an
index used twice receives the sum.  The row at ``padding_idx`` receives no gradient, and
with ``scale_grad_by_freq`` each use is divided by how often its index occurs.
"""

import numpy as np

from lezero.backends import get_backend
from lezero.core import Function
from lezero.functions.common import xp_of
from lezero.functions.registry import register
from lezero.kernels.scatter import scatter_add_
from lezero.utils.checks import check_array, check_bool, check_float_array, check_int, check_real

__all__ = ["embedding"]


class Embedding(Function):
    """weight (num, dim) -> weight[indices], of shape indices.shape + (dim,).

    ``use_weight`` (None, or an array of indices' shape) scales each use's gradient:
    0 for padding, 1 / count for scale_grad_by_freq.
    """

    reads_outputs = False

    def __init__(self, indices, use_weight=None):
        self.indices = indices
        self.use_weight = use_weight

    def forward(self, w):
        self.num = w.shape[0]
        return xp_of(w).take(w, self.indices, axis=0)

    def backward(self, gy):
        return EmbeddingGrad(self.indices, self.use_weight, self.num)(gy)


class EmbeddingGrad(Function):
    """gy (indices.shape + (dim,)) -> the (num, dim) weight gradient, by scatter-add.

    Its backward reads rows back (an Embedding lookup) *without* the padding/frequency
    scaling, as PyTorch's double backward does: the lookup that produced gy already
    applies that scaling on its own way back, so double backward through
    ``embedding(...) ** 2`` equals the true derivative of the first-order gradient.
    """

    def __init__(self, indices, use_weight, num):
        self.indices = indices
        self.use_weight = use_weight
        self.num = num

    def forward(self, gy):
        dim = gy.shape[-1]
        rows = gy.reshape(-1, dim)
        if self.use_weight is not None:
            rows = rows * self.use_weight.reshape(-1, 1)
        gw = xp_of(gy).zeros((self.num, dim), dtype=gy.dtype)
        scatter_add_(gw, self.indices.reshape(-1), rows)
        return gw

    def backward(self, ggw):
        return Embedding(self.indices)(ggw)


def check_indices(op, indices, num, where=""):
    """TypeError unless ``indices`` hold integers, ValueError unless each picks one of
    ``num`` rows; ``where`` adds where the bad index was (" in input").  The range is
    checked on the host only: on a device it would cost two synchronizations a call."""
    if indices.dtype.kind not in "iu":
        raise TypeError(f"{op}: input must hold integer indices, got dtype {indices.dtype}")
    if indices.size and get_backend(indices).is_host:
        lo, hi = int(indices.min()), int(indices.max())
        bad = lo if lo < 0 else hi if hi >= num else None
        if bad is not None:
            raise ValueError(f"{op}: index {bad}{where} is out of range for a weight with "
                             f"{num} rows (valid indices are 0 to {num - 1})")


def check_padding_idx(padding_idx, num, op="embedding"):
    """``padding_idx`` as a row number in [0, num), or None."""
    if padding_idx is None:
        return None
    padding_idx = check_int(op, "padding_idx", padding_idx, allow_none=True)
    if not -num <= padding_idx < num:
        raise ValueError(f"{op}: padding_idx {padding_idx} is out of range for a weight "
                         f"with {num} rows")
    return int(padding_idx) % num


def renorm_rows_(w, indices, max_norm, norm_type):
    """Scale the referenced rows of ``w`` in place so their norm is at most ``max_norm``
    (PyTorch's embedding_renorm_, including its 1e-7 guard)."""
    xp = xp_of(w)
    rows = xp.unique(indices)
    norms = (xp.abs(w[rows].astype(np.float64)) ** norm_type).sum(axis=1) ** (1 / norm_type)
    big = norms > max_norm
    scale = (max_norm / (norms[big] + 1e-7)).astype(w.dtype)
    w[rows[big]] *= scale[:, None]


@register("embedding")
def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
              scale_grad_by_freq=False, sparse=False):
    """Rows of ``weight`` (num_embeddings, embedding_dim) picked by the integer ``input``
    (any shape); the result has shape input.shape + (embedding_dim,).

    ``padding_idx``: that row gets no gradient (its value is still returned).
    ``max_norm``: rows that are looked up and longer than ``max_norm`` (in the
    ``norm_type``-norm) are first scaled down *in place* in ``weight``, as in PyTorch.
    ``scale_grad_by_freq``: divide each row's gradient by its index's count in ``input``.
    """
    indices = check_array("embedding", "input", input)
    w = check_float_array("embedding", "weight", weight)
    if w.ndim != 2:
        raise ValueError(f"embedding: weight must be 2-D (num_embeddings, embedding_dim), "
                         f"got shape {w.shape}")
    num = w.shape[0]
    check_indices("embedding", indices, num)
    padding_idx = check_padding_idx(padding_idx, num)
    if check_bool("embedding", "sparse", sparse):
        raise ValueError("embedding: sparse=True is not supported (gradients are dense)")
    scale_grad_by_freq = check_bool("embedding", "scale_grad_by_freq", scale_grad_by_freq)
    xp = xp_of(w)
    indices = xp.asarray(indices)          # on the weight's device
    if max_norm is not None:
        max_norm = check_real("embedding", "max_norm", max_norm)
        norm_type = check_real("embedding", "norm_type", norm_type)
        if max_norm <= 0 or norm_type <= 0:
            raise ValueError(f"embedding: max_norm and norm_type must be positive, got "
                             f"{max_norm} and {norm_type}")
        renorm_rows_(w, indices, max_norm, norm_type)

    use_weight = None
    if scale_grad_by_freq or padding_idx is not None:
        use_weight = xp.ones(indices.shape, dtype=w.dtype)
        if scale_grad_by_freq:
            counts = xp.bincount(indices.reshape(-1), minlength=num)
            use_weight = use_weight / counts[indices].astype(w.dtype)
        if padding_idx is not None:
            use_weight = use_weight * (indices != padding_idx)
    return Embedding(indices, use_weight)(weight)
