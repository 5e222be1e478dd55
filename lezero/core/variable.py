"""``Variable`` (a node holding an array and its gradient) and ``Parameter``.

This file knows the graph only.  What makes a Variable feel like an array -- operators
and methods (``+``, ``@``, ``x.sum()``, ``x.T``), its repr, comparisons, ``item()``,
devices, ``detach()``, ``unchain()`` -- is attached by ``lezero.functions.variable_methods``
when the package is imported.
"""
import numpy as np

from lezero.cuda import as_array


# bfloat16 and float8 (ml_dtypes' numeric dtypes, kind 'V' to NumPy) are numbers too.
_EXTRA = ("bfloat16", "float8_e4m3fn", "float8_e5m2")
_ndarray = np.ndarray


class Variable:
    """A node of the graph: ``data`` (an ndarray), ``grad`` (a Variable or None) and
    ``creator`` (the Function that produced it, None for leaves).

    A Variable made by the user is a leaf that receives ``.grad`` on backward.  Pass
    ``requires_grad=False`` to make a constant that no gradient flows into.
    """

    __slots__ = ("data", "name", "grad", "creator", "generation", "requires_grad",
                 "_hooks", "_post_hooks", "__weakref__")
    __array_priority__ = 200      # make ndarray + Variable call Variable.__radd__

    def __init__(self, data, name=None, requires_grad=True):
        if type(data) is not _ndarray:
            if data is not None:
                data = as_array(data)
        elif data.dtype.kind not in "biufc" and data.dtype.name not in _EXTRA:
            raise TypeError(f"Variable: data of dtype {data.dtype} is not numeric")
        self.data, self.name, self.requires_grad = data, name, requires_grad
        self.grad = self.creator = self._hooks = self._post_hooks = None
        self.generation = 0

    # ----- array-like properties -------------------------------------------------
    shape = property(lambda self: self.data.shape, doc="The shape of ``data``.")
    ndim = property(lambda self: self.data.ndim, doc="The number of axes of ``data``.")
    size = property(lambda self: self.data.size, doc="The number of elements of ``data``.")
    dtype = property(lambda self: self.data.dtype, doc="The dtype of ``data``.")

    __hash__ = object.__hash__    # identity hashing, so Variables can key dicts and sets

    # ----- graph ----------------------------------------------------------------
    def cleargrad(self):
        """Forget the accumulated gradient."""
        self.grad = None

    zero_grad = cleargrad

    def backward(self, retain_grad=False, create_graph=False, grad=None, retain_graph=None):
        """Backpropagate from this Variable, accumulating ``.grad`` on every leaf.

        ``grad`` is the upstream gradient (defaults to ones, as in DeZero).  With
        ``create_graph=True`` the gradients are themselves differentiable.  What the graph
        kept is freed as the pass uses it unless ``retain_graph`` (default:
        ``create_graph``): a second backward through it then needs ``retain_graph=True``
        the first time, as in PyTorch.
        """
        if type(retain_grad) is not bool or type(create_graph) is not bool:
            for name, flag in (("retain_grad", retain_grad), ("create_graph", create_graph)):
                if not isinstance(flag, (bool, np.bool_)):
                    # PyTorch's backward takes the upstream gradient first; here a keyword.
                    raise TypeError(f"backward: {name} must be a bool, got {type(flag).__name__}"
                                    "; pass an upstream gradient as backward(grad=...)")
        _run([self], None if grad is None else [grad], retain_grad, create_graph, None,
             retain_graph)

    def register_hook(self, fn):
        """Call ``fn(grad)`` when this Variable's gradient is computed; a returned
        value replaces the gradient.  Returns a handle whose ``remove()`` undoes it."""
        if self._hooks is None:
            self._hooks = []
        return _HookHandle(self._hooks, fn)

    def register_post_accumulate_grad_hook(self, fn):
        """Call ``fn(self)`` once per backward, after ``self.grad`` holds the new total."""
        if self.creator is not None:
            raise ValueError("register_post_accumulate_grad_hook: only leaf Variables "
                             "accumulate gradients")
        if self._post_hooks is None:
            self._post_hooks = []
        return _HookHandle(self._post_hooks, fn)


class Parameter(Variable):
    """A Variable that a Module registers as trainable."""

    __slots__ = ("__dict__",)


def as_variable(x):
    """Wrap an array in a constant Variable; Variables pass through."""
    if isinstance(x, Variable):
        return x
    return Variable(as_array(x), requires_grad=False)


class _HookHandle:
    """Returned by ``register_hook``: ``remove()`` unregisters the hook."""

    def __init__(self, hooks, fn):
        if not callable(fn):
            raise TypeError(f"register_hook: expected a callable, got {type(fn).__name__}")
        self._hooks, self._fn = hooks, fn
        hooks.append(fn)

    def remove(self):
        if self._fn in self._hooks:
            self._hooks.remove(self._fn)


# Imported last: the engine needs Variable defined first.
from lezero.core.backward import _run  # noqa: E402
