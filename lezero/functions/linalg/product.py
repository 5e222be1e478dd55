"""Products: matmul, dot, tensordot, outer, linear, bilinear.

``matmul`` and ``tensordot`` are Functions whose gradients are again products of the
upstream gradient with the other operand.  ``linear`` is one fused Function because every
MLP layer runs it: the forward is a single matrix product against a transposed *view* of
the weight, and the backward is two tensordots and a sum.
"""
import math

from lezero.core import Function
from lezero.functions.common import inverse_permutation, xp_of
from lezero.functions.linalg.contraction import einsum
from lezero.functions.math import add, mul
from lezero.functions.registry import register
from lezero.functions.shape import reshape, sum_to, swapaxes, transpose
from lezero.kernels.bias import add_bias_, bias_grad
from lezero.runtime.blas import matmul as blas_matmul, matmul_nd
from lezero.runtime.products import matmul_pair
from lezero.utils.checks import check_array, check_axis, check_float_array

__all__ = ["matmul", "dot", "tensordot", "outer", "linear", "bilinear"]


def _mT(x):
    """Swap the last two axes (a batched matrix transpose)."""
    return swapaxes(x, -1, -2)


class MatMul(Function):
    reads_outputs = False

    def forward(self, a, b):
        if a.ndim >= 2 and b.ndim >= 2:         # MKL where available (runtime.blas)
            return matmul_nd(xp_of(a), a, b)
        return a @ b

    def backward(self, gy):
        a, b = self.inputs
        # numpy.matmul treats a 1-D ``a`` as a row (1, k) and a 1-D ``b`` as a column
        # (k, 1), then drops that unit axis from the result; redo it on all three.
        a2 = reshape(a, (1, -1)) if a.ndim == 1 else a
        b2 = reshape(b, (-1, 1)) if b.ndim == 1 else b
        gshape = gy.shape + ((1,) if b.ndim == 1 else ())
        if a.ndim == 1:
            gshape = gshape[:-1] + (1,) + gshape[-1:]
        g = reshape(gy, gshape)
        ga = gb = None
        if self.needs_input_grad[0]:     # sum_to undoes the broadcasting of batch axes
            ga = reshape(sum_to(matmul(g, _mT(b2)), a2.shape), a.shape)
        if self.needs_input_grad[1]:
            gb = reshape(sum_to(matmul(_mT(a2), g), b2.shape), b.shape)
        return ga, gb


@register("linalg")
def matmul(a, b):
    """Matrix product with NumPy's ``matmul`` rules (batch broadcasting, 1-D operands)."""
    sa = check_array("matmul", "a", a).shape
    sb = check_array("matmul", "b", b).shape
    if len(sa) == 0 or len(sb) == 0:
        raise ValueError(f"matmul: operands must have at least 1 dim, got shapes {sa} and {sb}")
    kb = sb[-2] if len(sb) > 1 else sb[0]
    if sa[-1] != kb:
        raise ValueError(f"matmul: inner dimensions differ: shapes {sa} and {sb}")
    return MatMul()(a, b)


class Tensordot(Function):
    """Contract ``axes_a`` of ``a`` with ``axes_b`` of ``b`` (normalised tuples)."""

    def __init__(self, axes_a, axes_b):
        self.axes_a = axes_a
        self.axes_b = axes_b

    def forward(self, a, b):
        ends_a, ends_b = _block_end(self.axes_a, a.ndim), _block_end(self.axes_b, b.ndim)
        if ends_a and ends_b:
            return _matrix_tensordot(a, b, len(self.axes_a), ends_a, ends_b)
        return xp_of(a, b).tensordot(a, b, axes=(self.axes_a, self.axes_b))

    def backward(self, gy):
        a, b = self.inputs
        free_a = tuple(i for i in range(a.ndim) if i not in self.axes_a)
        free_b = tuple(i for i in range(b.ndim) if i not in self.axes_b)
        na = len(free_a)
        ga = gb = None
        # Contracting gy with the other operand's free axes leaves this operand's free
        # axes and its contracted ones, the latter ordered as the other operand's axes
        # they were paired with; permute back to this operand's layout.
        pairs = list(zip(self.axes_a, self.axes_b))
        if self.needs_input_grad[0]:
            g = Tensordot(tuple(range(na, gy.ndim)), free_b)(gy, b)
            ga = _unpermute(g, free_a + tuple(i for i, _ in sorted(pairs, key=lambda p: p[1])))
        if self.needs_input_grad[1]:
            g = Tensordot(free_a, tuple(range(na)))(a, gy)
            gb = _unpermute(g, tuple(j for _, j in sorted(pairs)) + free_b)
        return ga, gb


def _block_end(axes, ndim):
    """"lead" or "trail" when ``axes`` are the first or last axes in increasing order."""
    k = len(axes)
    if k and axes == tuple(range(k)):
        return "lead"
    if k and axes == tuple(range(ndim - k, ndim)):
        return "trail"
    return None


def _matrix_tensordot(a, b, k, ends_a, ends_b):
    """tensordot over k leading or trailing axes of each operand as ONE matrix product.

    Reshaping a contiguous array merges axes without copying, and a transposed view goes
    to BLAS as a flag; ``numpy.tensordot`` instead transposes first, and its reshape then
    copies both operands (linear's backward spent a third of its time on those copies).
    """
    free_a = a.shape[k:] if ends_a == "lead" else a.shape[:a.ndim - k]
    free_b = b.shape[k:] if ends_b == "lead" else b.shape[:b.ndim - k]
    m, n = math.prod(free_a), math.prod(free_b)
    inner = math.prod(a.shape[:k] if ends_a == "lead" else a.shape[a.ndim - k:])
    A = a.reshape(inner, m).T if ends_a == "lead" else a.reshape(m, inner)
    B = b.reshape(inner, n) if ends_b == "lead" else b.reshape(n, inner).T
    return blas_matmul(A, B).reshape(free_a + free_b)   # small ones on one BLAS thread


def _unpermute(g, order):
    """``g``'s axes are the input's axes in ``order``; put them back in 0, 1, 2 ..."""
    if list(order) == sorted(order):
        return g
    return transpose(g, inverse_permutation(order))


def _tensordot_axes(sa, sb, axes):
    """NumPy's ``axes`` argument as two tuples of normalised axes, checked for sizes."""
    if isinstance(axes, int) and not isinstance(axes, bool):
        if not 0 <= axes <= min(len(sa), len(sb)):
            raise ValueError(f"tensordot: axes={axes} does not fit operands of shapes "
                             f"{sa} and {sb}")
        axes_a = tuple(range(len(sa) - axes, len(sa)))
        axes_b = tuple(range(axes))
    elif isinstance(axes, (tuple, list)) and len(axes) == 2:
        pair = [tuple(ax) if isinstance(ax, (tuple, list)) else (ax,) for ax in axes]
        if len(pair[0]) != len(pair[1]):
            raise ValueError(f"tensordot: axes {axes!r} name different numbers of axes")
        axes_a = tuple(check_axis("tensordot", ax, len(sa), "axes", zero_dim=False) for ax in pair[0])
        axes_b = tuple(check_axis("tensordot", ax, len(sb), "axes", zero_dim=False) for ax in pair[1])
        if len(set(axes_a)) != len(axes_a) or len(set(axes_b)) != len(axes_b):
            raise ValueError(f"tensordot: repeated axis in {axes!r}")
    else:
        raise TypeError(f"tensordot: axes must be an int or a pair of axis sequences, "
                        f"got {axes!r}")
    for i, j in zip(axes_a, axes_b):
        if sa[i] != sb[j]:
            raise ValueError(f"tensordot: axis {i} of a (length {sa[i]}) and axis {j} of b "
                             f"(length {sb[j]}) differ; shapes {sa} and {sb}")
    return axes_a, axes_b


@register("linalg")
def tensordot(a, b, axes=2):
    """Sum products over the given axes, as ``numpy.tensordot``: ``axes=N`` contracts the
    last N axes of ``a`` with the first N of ``b``; ``axes=(axes_a, axes_b)`` names them.
    The result's axes are ``a``'s free axes then ``b``'s."""
    sa = check_array("tensordot", "a", a).shape
    sb = check_array("tensordot", "b", b).shape
    return Tensordot(*_tensordot_axes(sa, sb, axes))(a, b)


@register("linalg")
def dot(a, b):
    """``numpy.dot``: a product with a 0-d operand is elementwise; otherwise the last axis
    of ``a`` is contracted with the only axis of a 1-D ``b`` or the second-to-last of
    ``b``.  (For 2-D operands this is the matrix product.)"""
    A = check_array("dot", "a", a)
    B = check_array("dot", "b", b)
    if A.ndim == 0 or B.ndim == 0:
        return mul(a, b)
    axis_b = 0 if B.ndim == 1 else B.ndim - 2
    if A.shape[-1] != B.shape[axis_b]:
        raise ValueError(f"dot: shapes {A.shape} and {B.shape} are not aligned "
                         f"({A.shape[-1]} != {B.shape[axis_b]})")
    return Tensordot((A.ndim - 1,), (axis_b,))(a, b)


@register("linalg")
def outer(a, b):
    """The outer product of ``a`` and ``b`` flattened (shape ``(a.size, b.size)``), as
    ``numpy.outer``."""
    check_array("outer", "a", a)
    check_array("outer", "b", b)
    return mul(reshape(a, (-1, 1)), reshape(b, (1, -1)))


class Linear(Function):
    """``y = x @ weight.T + bias`` over any leading batch axes of ``x``."""

    reads_outputs = False

    def forward(self, x, weight, bias=None):
        # The batch axes are merged (a view for contiguous x) so the product is one GEMM;
        # weight.T is a view, which BLAS reads as a transposed operand without a copy.
        y = blas_matmul(x.reshape(-1, x.shape[-1]), weight.T)   # small: one BLAS thread
        if bias is not None:
            add_bias_(y, bias)          # one Numba pass over the rows (kernels/bias.py)
        return y.reshape(x.shape[:-1] + (weight.shape[0],))

    def backward(self, gy):
        x, weight = self.inputs[:2]           # differentiable operators (create_graph)
        needs = self.needs_input_grad
        batch = tuple(range(gy.ndim - 1))
        gx = Tensordot((gy.ndim - 1,), (0,))(gy, weight) if needs[0] else None   # gy @ W
        gw = Tensordot(batch, batch)(gy, x) if needs[1] else None    # gy^T x over the batch
        if len(needs) == 2:
            return gx, gw
        return gx, gw, (sum_to(gy, (weight.shape[0],)) if needs[2] else None)

    def backward_arrays(self, gy):
        """The first-order gradients as arrays: the same products and sum as above, minus
        the three Functions that would record them (~10 us each, per layer and step).
        The two products are independent: large ones run at once (``lezero.runtime.products``)."""
        x, weight = self.inputs[0].data, self.inputs[1].data
        needs = self.needs_input_grad
        g = gy.reshape(-1, gy.shape[-1])
        xs = x.reshape(-1, x.shape[-1])
        if needs[0] and needs[1]:
            gx, gw = matmul_pair(g, weight, g.T, xs)
            gx = gx.reshape(x.shape)
        else:
            gx = blas_matmul(g, weight).reshape(x.shape) if needs[0] else None
            gw = blas_matmul(g.T, xs) if needs[1] else None
        if len(needs) == 2:
            return gx, gw
        return gx, gw, (bias_grad(g) if needs[2] else None)


@register("linalg")
def linear(x, weight, bias=None):
    """``x @ weight.T + bias`` as ``torch.nn.functional.linear``: ``weight`` has shape
    ``(out_features, in_features)``, ``bias`` ``(out_features,)``, and ``x`` any number
    of leading batch axes before ``in_features``."""
    xa = check_float_array("linear", "x", x)
    wa = check_float_array("linear", "weight", weight)
    if wa.ndim != 2:
        raise ValueError(f"linear: weight must be 2-D (out_features, in_features), got shape "
                         f"{wa.shape}")
    if xa.ndim == 0 or xa.shape[-1] != wa.shape[1]:
        raise ValueError(f"linear: x's last axis must have in_features={wa.shape[1]} "
                         f"(weight shape {wa.shape}), got x shape {xa.shape}")
    if bias is None:
        return Linear()(x, weight)
    ba = check_float_array("linear", "bias", bias)
    if ba.shape != (wa.shape[0],):
        raise ValueError(f"linear: bias must have shape ({wa.shape[0]},), got {ba.shape}")
    return Linear()(x, weight, bias)


@register("linalg")
def bilinear(x1, x2, weight, bias=None):
    """``y[..., o] = sum_ij x1[..., i] weight[o, i, j] x2[..., j] + bias[o]``, as
    ``torch.nn.functional.bilinear``; ``weight`` is ``(out, in1, in2)`` and ``x1``, ``x2``
    share their leading batch axes.  Computed (and differentiated) by ``einsum``."""
    a1 = check_float_array("bilinear", "x1", x1)
    a2 = check_float_array("bilinear", "x2", x2)
    wa = check_float_array("bilinear", "weight", weight)
    if wa.ndim != 3:
        raise ValueError(f"bilinear: weight must be 3-D (out, in1, in2), got shape {wa.shape}")
    if a1.ndim == 0 or a2.ndim == 0 or a1.shape[:-1] != a2.shape[:-1] \
            or (a1.shape[-1], a2.shape[-1]) != wa.shape[1:]:
        raise ValueError(f"bilinear: x1 {a1.shape} and x2 {a2.shape} must share batch axes "
                         f"and end in in1, in2 = {wa.shape[1:]} (weight shape {wa.shape})")
    y = einsum("...i,oij,...j->...o", x1, weight, x2)
    if bias is None:
        return y
    ba = check_float_array("bilinear", "bias", bias)
    if ba.shape != (wa.shape[0],):
        raise ValueError(f"bilinear: bias must have shape ({wa.shape[0]},), got {ba.shape}")
    return add(y, bias)
