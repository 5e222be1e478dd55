"""``scatter``: a copy of ``x`` with ``src`` written at ``index`` along ``axis``
(``torch.scatter``, out of place).

For axis 1: ``out[i][index[i][j][k]][k] = src[i][j][k]``.  The gradient follows PyTorch:
``x`` gets the upstream gradient where nothing was written (zeros where it was
overwritten), and ``src`` gets the upstream gradient gathered at ``index``.  Both are
linear in the upstream gradient and written with differentiable operators, so the
derivative can be taken again.  When ``index`` repeats a position along ``axis``, which
write wins is unspecified in PyTorch; here the last one does (NumPy's rule).
"""
import numpy as np

from lezero.functions.common import as_variable, xp_of
from lezero.functions.registry import register
from lezero.functions.shape.index import ScatterAdd, _check_scatter_index, scatter_add
from lezero.utils.checks import check_array, check_choice

__all__ = ["scatter"]


class Scatter(ScatterAdd):
    """out = x with ``src[:index.shape]`` written at ``index`` along ``axis``.  The src
    gradient is scatter_add's (gathered at ``index``); x's is masked where written."""

    def forward(self, x, src):
        self.src_shape = src.shape
        out = x.copy()
        out[self.full] = src[tuple(slice(0, s) for s in self.index.shape)]
        # 1 where x survives, 0 where it was overwritten: x's gradient mask
        self.keep = xp_of(x).ones(x.shape, dtype=x.dtype)
        self.keep[self.full] = 0
        return out

    def backward(self, gy):
        gx, gsrc = super().backward(gy)
        return (None if gx is None else gy * as_variable(self.keep)), gsrc


def _src_operand(arr, src, index_shape):
    """``src`` as an array argument: a number becomes a constant filled array."""
    if isinstance(src, (bool, np.bool_)) or not isinstance(src, (int, float, np.number)):
        src_arr = check_array("scatter", "src", src)
        if src_arr.dtype != arr.dtype:
            raise TypeError(f"scatter: src dtype {src_arr.dtype} differs from x dtype "
                            f"{arr.dtype}")
        if src_arr.ndim != len(index_shape) or any(
                i > s for i, s in zip(index_shape, src_arr.shape)):
            raise ValueError(f"scatter: src shape {src_arr.shape} must be at least index "
                             f"shape {index_shape} in every dim")
        return src
    return xp_of(arr).full(index_shape, src, dtype=arr.dtype)


@register("shape", notes="reduce='add' is scatter_add")
def scatter(x, axis, index, src, reduce=None):
    """A copy of ``x`` with ``src`` written at ``index`` along ``axis``, as
    ``torch.scatter``: ``out[i][index[i][j][k]][k] = src[i][j][k]`` (for axis 1).

    ``src`` is an array with at least ``index``'s shape in every dim (only its leading
    ``index.shape`` block is used) or a number written everywhere ``index`` points.
    ``reduce='add'`` adds instead of writing (``scatter_add``); PyTorch's deprecated
    ``reduce='multiply'`` is not provided.  Gradients flow to ``x`` (where not
    overwritten) and to ``src`` (gathered at ``index``).
    """
    arr = check_array("scatter", "x", x)
    if reduce is not None:
        check_choice("scatter", "reduce", reduce, ("add",))
    axis, idx = _check_scatter_index("scatter", arr, axis, index)
    src = _src_operand(arr, src, idx.shape)
    if reduce == "add":
        return scatter_add(x, axis, idx, src)
    return Scatter(axis, idx)(x, src)
