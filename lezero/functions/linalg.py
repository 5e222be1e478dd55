"""Linear algebra: matmul (NumPy semantics, batched and 1-D), and friends."""
from lezero.core import Function
from lezero.functions._utils import data_of
from lezero.functions.registry import register
from lezero.functions.shape import reshape, sum_to, transpose

__all__ = ["matmul"]


def _mT(x):
    """Swap the last two axes."""
    axes = list(range(x.ndim))
    axes[-1], axes[-2] = axes[-2], axes[-1]
    return transpose(x, tuple(axes))


class MatMul(Function):
    def forward(self, a, b):
        return a @ b

    def backward(self, gy):
        a, b = self.inputs
        # Treat 1-D operands as matrices, as numpy.matmul does, then undo it.
        a2 = reshape(a, (1, a.shape[0])) if a.ndim == 1 else a
        b2 = reshape(b, (b.shape[0], 1)) if b.ndim == 1 else b
        g = gy
        if a.ndim == 1:
            g = reshape(g, g.shape[:-1] + (1,) + g.shape[-1:]) if b.ndim > 1 else g
        if b.ndim == 1:
            g = reshape(g, g.shape + (1,))
        if a.ndim == 1 and b.ndim == 1:
            g = reshape(gy, (1, 1))
        ga = gb = None
        if self.needs_input_grad[0]:
            ga = reshape(sum_to(matmul(g, _mT(b2)), a2.shape), a.shape)
        if self.needs_input_grad[1]:
            gb = reshape(sum_to(matmul(_mT(a2), g), b2.shape), b.shape)
        return ga, gb


@register("linalg")
def matmul(a, b):
    """Matrix product with NumPy's ``matmul`` rules (batch broadcasting, 1-D operands)."""
    sa, sb = data_of(a).shape, data_of(b).shape
    if len(sa) == 0 or len(sb) == 0:
        raise ValueError(f"matmul: operands must have at least 1 dim, got shapes {sa} and {sb}")
    ka = sa[-1]
    kb = sb[-2] if len(sb) > 1 else sb[0]
    if ka != kb:
        raise ValueError(f"matmul: inner dimensions differ: shapes {sa} and {sb}")
    return MatMul()(a, b)
