"""Matrix functions: inv, det, solve, cholesky, batched over leading axes.

Each forward is one LAPACK call (through NumPy or CuPy); a matrix LAPACK cannot handle
(singular, not positive definite) is reported as a ValueError naming the operator.  The
backwards are the textbook formulas, written with matmul, solve and tril, so they
differentiate again:

    inv:      gA = -Y^T gY Y^T                        (Y = A^-1)
    det:      gA = g * det(A) * A^-T
    solve:    gB = A^-T gX,  gA = -gB X^T             (X = A^-1 B)
    cholesky: gA = L^-T Phi(L^T gL) L^-1, symmetrised  (A = L L^T)
"""
import numpy as np

from lezero.backends import get_backend
from lezero.core import Function
from lezero.functions.common import xp_of
from lezero.functions.linalg.product import _mT, matmul
from lezero.functions.math import add, mul, neg
from lezero.functions.registry import register
from lezero.functions.shape import reshape, sum_to, tril
from lezero.utils.checks import check_float_array

__all__ = ["inv", "det", "solve", "cholesky"]


def _lapack(op, problem, fn, *arrays):
    """Run ``fn(*arrays)``; turn LAPACK's failure into a ValueError naming ``op``."""
    try:
        y = fn(*arrays)
    except np.linalg.LinAlgError as e:
        raise ValueError(f"{op}: {problem} ({e})") from None
    # A device's solver (cuSOLVER) returns nan instead of raising: one check, one sync per
    # call, as torch.linalg.inv's on CUDA.
    if not get_backend(y).is_host and not bool(xp_of(y).isfinite(y).all()):
        raise ValueError(f"{op}: {problem} (the result is not finite)")
    return y


def _check_square(op, name, a):
    arr = check_float_array(op, name, a)
    if arr.ndim < 2 or arr.shape[-1] != arr.shape[-2]:
        raise ValueError(f"{op}: {name} must be a square matrix or a stack of them "
                         f"(..., n, n), got shape {arr.shape}")
    return arr


class Inv(Function):
    def forward(self, a):
        return _lapack("inv", "the matrix is singular", xp_of(a).linalg.inv, a)

    def backward(self, gy):
        yt = _mT(self.outputs[0]())
        return neg(matmul(matmul(yt, gy), yt))


@register("linalg")
def inv(a):
    """The inverse of a square matrix (or of each in a stack ``(..., n, n)``)."""
    _check_square("inv", "a", a)
    return Inv()(a)


class Det(Function):
    def forward(self, a):
        return xp_of(a).linalg.det(a)

    def backward(self, gy):
        a = self.inputs[0]
        g = reshape(mul(gy, self.outputs[0]()), gy.shape + (1, 1))
        try:
            a_inv = inv(a)
        except ValueError:
            raise ValueError("det: the gradient needs the inverse, and the matrix is "
                             "singular") from None
        return mul(g, _mT(a_inv))


@register("linalg")
def det(a):
    """The determinant of a square matrix (or of each in a stack: shape ``(...)``).

    Its gradient ``det(A) * A^-T`` needs A to be invertible (singular A is an error on
    backward).
    """
    _check_square("det", "a", a)
    return Det()(a)


class Solve(Function):
    """``X = A^-1 B`` for stacks of matrices; batch axes broadcast."""

    def forward(self, a, b):
        xp = xp_of(a, b)
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        a = xp.broadcast_to(a, batch + a.shape[-2:])
        b = xp.broadcast_to(b, batch + b.shape[-2:])
        return _lapack("solve", "the matrix a is singular", xp.linalg.solve, a, b)

    def backward(self, gx):
        a, b = self.inputs
        need_a, need_b = self.needs_input_grad
        gb = Solve()(_mT(a), gx)
        ga = neg(matmul(gb, _mT(self.outputs[0]()))) if need_a else None
        return (sum_to(ga, a.shape) if need_a else None), (sum_to(gb, b.shape) if need_b else None)


@register("linalg")
def solve(a, b):
    """The solution ``x`` of ``a @ x = b``, as ``numpy.linalg.solve`` (NumPy 2 rules): a
    1-D ``b`` is one vector; otherwise ``b`` is a stack of ``(n, k)`` matrices whose batch
    axes broadcast against ``a``'s."""
    A = _check_square("solve", "a", a)
    B = check_float_array("solve", "b", b)
    n = A.shape[-1]
    if B.ndim == 0:
        raise ValueError(f"solve: b must be (n,) or (..., n, k), got a 0-d array (a of shape "
                         f"{A.shape})")
    if B.ndim == 1:
        if B.shape[0] != n:
            raise ValueError(f"solve: b of shape {B.shape} does not match a of shape {A.shape}")
        x = Solve()(a, reshape(b, (n, 1)))
        return reshape(x, x.shape[:-1])
    try:
        ok = B.shape[-2] == n and np.broadcast_shapes(A.shape[:-2], B.shape[:-2]) is not None
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"solve: b of shape {B.shape} does not match a of shape {A.shape} "
                         "(expected (..., n, k) with broadcastable batch axes, or (n,))")
    return Solve()(a, b)


class Cholesky(Function):
    def forward(self, a):
        return _lapack("cholesky", "the matrix is not positive definite",
                       xp_of(a).linalg.cholesky, a)

    def backward(self, gl):
        lower = self.outputs[0]()
        lt = _mT(lower)
        # Phi(L^T gL): the lower triangle with its diagonal halved, made symmetric.
        m = tril(matmul(lt, gl))
        m = mul(add(m, _mT(tril(m, -1))), 0.5)
        z = Solve()(lt, m)                       # L^-T m
        return _mT(Solve()(lt, _mT(z)))           # (L^-T (L^-T m)^T)^T = L^-T m L^-1


@register("linalg")
def cholesky(a):
    """The lower-triangular ``L`` with ``a = L @ L.T`` for a symmetric positive-definite
    ``a`` (or a stack), as ``numpy.linalg.cholesky``.

    Only the lower triangle of ``a`` is read; the gradient is the symmetric one (as in
    PyTorch), so test it on inputs built symmetric, e.g. ``m @ m.T + n * I``.
    """
    _check_square("cholesky", "a", a)
    return Cholesky()(a)
