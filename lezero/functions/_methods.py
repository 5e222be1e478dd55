"""Attach operators to ``Variable`` as Python operators and methods.

Called once by ``lezero.functions`` at import: ``x + y``, ``x @ w``, ``x[i]``, ``x.sum()``,
``x.reshape(2, -1)``, ``x.T`` ... all become calls into ``lezero.functions``.
"""
from lezero.core import Variable

# Operators whose first argument is the Variable itself: x.name(*args) == F.name(x, *args).
METHODS = (
    "sum", "mean", "prod", "max", "min", "var", "std", "logsumexp", "norm", "cumsum", "cumprod",
    "argmax", "argmin", "all", "any", "topk",
    "squeeze", "expand_dims", "flatten", "swapaxes", "moveaxis", "broadcast_to", "sum_to",
    "repeat", "tile", "flip", "roll", "take", "gather", "scatter_add", "index_select",
    "masked_fill", "tril", "triu", "diagonal", "split", "chunk",
    "exp", "expm1", "log", "log1p", "log2", "log10", "sqrt", "rsqrt", "square", "abs", "sign",
    "sin", "cos", "tan", "tanh", "sinh", "cosh", "sigmoid", "relu", "erf", "clip",
    "floor", "ceil", "round", "reciprocal", "maximum", "minimum", "pow",
    "softmax", "log_softmax", "matmul", "dot",
)


def install(F):
    """Install the operator overloads and methods of ``F`` (the functions module)."""
    V = Variable
    V.__add__ = V.__radd__ = F.add
    V.__sub__ = F.sub
    V.__rsub__ = F.rsub
    V.__mul__ = V.__rmul__ = F.mul
    V.__truediv__ = F.div
    V.__rtruediv__ = F.rdiv
    V.__neg__ = F.neg
    V.__pos__ = lambda self: self
    V.__pow__ = F.pow
    V.__rpow__ = F.rpow
    V.__matmul__ = F.matmul
    V.__rmatmul__ = lambda self, other: F.matmul(other, self)
    V.__getitem__ = F.get_item
    if hasattr(F, "abs"):
        V.__abs__ = F.abs

    def reshape(self, *shape):
        """x.reshape(2, -1) or x.reshape((2, -1))."""
        return F.reshape(self, *shape)

    def transpose(self, *axes):
        """x.transpose() reverses the axes; x.transpose(1, 0, 2) permutes them."""
        if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
            axes = axes[0]
        return F.transpose(self, tuple(axes) if axes else None)

    V.reshape = reshape
    V.transpose = transpose
    V.T = property(lambda self: F.transpose(self), doc="The transpose (axes reversed).")
    if hasattr(F, "swapaxes"):
        V.mT = property(lambda self: F.swapaxes(self, -1, -2), doc="Swap the last two axes.")
    for name in METHODS:
        fn = getattr(F, name, None)
        if fn is not None:
            setattr(V, name, fn)
