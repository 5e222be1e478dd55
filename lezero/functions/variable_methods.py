"""What makes a ``Variable`` feel like an array and like a ``torch.Tensor``.

The core (``lezero.core.variable``) knows the graph only.  ``install(F)``, called once by
``lezero.functions`` at import, attaches the rest:

- Python operators (``x + y``, ``x @ w``, ``x[i]``, ``-x``, ``abs(x)``) and the operator
  methods of ``METHODS`` (``x.sum()``, ``x.exp()``...), each a call into ``lezero.functions``;
- the array manners of ``ArrayManners``: repr, ``len``, ``item()``, ``bool``/``float``/
  ``int``, ``np.asarray(x)``, comparisons (constant boolean Variables, as in PyTorch);
- PyTorch's names for the same things (``numel``, ``dim``, ``is_leaf``, ``device``,
  ``numpy``, ``tolist``, ``detach``, ``requires_grad_``), and DeZero's in-place detaching
  (``unchain``, ``unchain_backward``);
- devices: ``to_cpu``/``to_gpu``/``to_device`` (in place, Chainer's way);
- ``torch.Tensor``'s methods that return a new Variable (``to``, ``float``, ``view``,
  ``permute``, ``clone``, ``size()``...): ``lezero.functions.tensor_methods``.
"""
import operator

import numpy as np

from lezero import cuda
from lezero.core import InputRef, Parameter, Variable
from lezero.functions import tensor_methods

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


def _comparison(op):
    def compare(self, other):
        return Variable(op(self.data, other.data if isinstance(other, Variable) else other),
                        requires_grad=False)
    compare.__doc__ = f"Elementwise ``{op.__name__}``: a constant boolean Variable."
    return compare


class ArrayManners:
    """Methods copied onto ``Variable`` by ``install`` (never instantiated)."""

    def __len__(self):
        return len(self.data)

    def __repr__(self):
        return _repr(self, "variable")

    def item(self):
        """The value of a one-element Variable as a Python number."""
        return self.data.item()

    def tolist(self):
        """The data as (nested) Python lists, like ``ndarray.tolist``."""
        return cuda.as_numpy(self.data).tolist()

    def numpy(self):
        """The data as a NumPy array (copied to the host from a GPU)."""
        return cuda.as_numpy(self.data)

    def __bool__(self):
        return bool(self.data)

    def __float__(self):
        return float(self.data)

    def __int__(self):
        return int(self.data)

    def __array__(self, dtype=None, copy=None):
        return np.asarray(cuda.as_numpy(self.data), dtype=dtype)

    __eq__, __ne__, __lt__, __le__, __gt__, __ge__ = (
        _comparison(op) for op in (operator.eq, operator.ne, operator.lt, operator.le,
                                   operator.gt, operator.ge))

    def numel(self):
        """The number of elements (``size``)."""
        return self.data.size

    def dim(self):
        """The number of axes (``ndim``)."""
        return self.data.ndim

    def unchain(self):
        """Cut the link to the creator: this Variable becomes a leaf (DeZero's in-place
        ``detach``)."""
        self.creator = None

    def unchain_backward(self):
        """Cut every link in the graph behind this Variable (truncated backprop)."""
        funcs = [self.creator] if self.creator is not None else []
        while funcs:
            f = funcs.pop()
            for i, x in enumerate(f.inputs):
                if x.creator is not None:
                    funcs.append(x.creator)
                    if type(x) is InputRef:       # a released input: the live one, or cut
                        live = x.creator.outputs[x.index]()
                        if live is None:
                            x.creator = None
                            continue
                        x = f.inputs[i] = live
                    x.unchain()

    @property
    def is_leaf(self):
        """True for a Variable no Function created (a user's input or a parameter)."""
        return self.creator is None

    @property
    def device(self):
        """``'cpu'`` or ``'cuda:N'``."""
        return cuda.device_of(self.data)

    def detach(self):
        """A new constant Variable sharing this one's data, outside every graph."""
        return Variable(self.data, name=self.name, requires_grad=False)

    def requires_grad_(self, flag=True):
        """Set ``requires_grad`` in place and return self."""
        self.requires_grad = flag
        return self

    def to_cpu(self):
        """Move data (and grad) to NumPy in place; returns self."""
        if self.data is not None:
            self.data = cuda.as_numpy(self.data)
        if self.grad is not None:
            self.grad.to_cpu()
        return self

    def to_gpu(self, device=None):
        """Move data (and grad) to the default device (``LEZERO_BACKEND``, else CuPy) in
        place; returns self."""
        return self.to_device(None, device)

    def to_device(self, name=None, device=None):
        """Move data (and grad) in place to backend ``name`` (``'strict'``, ``'cupy'``, a
        plugin's; default: the default device), device ``device`` (an int id) when given;
        returns self."""
        if self.data is not None:
            self.data = cuda.to_device(self.data, name, device)
        if self.grad is not None:
            self.grad.to_device(name, device)
        return self


def _repr(v, word):
    if v.data is None:
        return f"{word}(None)"
    body = str(v.data).replace("\n", "\n" + " " * (len(word) + 1))
    dtype = "" if v.data.dtype == np.float32 else f", dtype={v.data.dtype}"
    return f"{word}({body}{dtype})"


def _install_operators(V, F):
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
    V.__abs__ = F.abs


def _install_shape_methods(V, F):
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
    V.mT = property(lambda self: F.swapaxes(self, -1, -2), doc="Swap the last two axes.")


def install(F):
    """Install operators, methods and manners on ``Variable`` (``F``: the functions module)."""
    V = Variable
    for name, value in vars(ArrayManners).items():
        if not name.startswith("__") or name in _DUNDERS:
            setattr(V, name, value)
    Parameter.__repr__ = lambda self: _repr(self, "parameter")
    _install_operators(V, F)
    _install_shape_methods(V, F)
    for name in METHODS:
        setattr(V, name, getattr(F, name))
    tensor_methods.install(V)


_DUNDERS = {"__len__", "__repr__", "__bool__", "__float__", "__int__",
            "__array__", "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__"}
