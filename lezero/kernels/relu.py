"""ReLU and its gradient, each in one pass.

``relu(x)`` is ``max(x, 0)`` with NaN kept (as ``np.maximum`` and PyTorch do).  NumPy's
``maximum`` is one pass but a slow one, because it checks every element for NaN
(docs/performance.md).  The kernel is a select, which the compiler vectorises: 0 where
``x <= 0``, else ``x`` (so NaN, for which ``x <= 0`` is false, passes through).

``relu_grad(x, gy)`` is ``gy`` where ``x > 0``, else 0.  Written with NumPy operators it
is three passes and two temporaries (the mask ``x > 0``, its cast to the data's dtype, the
product); the kernel reads ``x`` and ``gy`` once and writes the result once.  NaN in ``x``
gives a zero gradient, as in PyTorch (``NaN > 0`` is false).

Both kernels release the GIL, and very long arrays are cut over threads by the runtime
(``run_elementwise``, parts of ``policy.cheap_min_part_items``: these kernels are cheap,
so a split pays only on long arrays).  ``*_ref`` are the NumPy (and CuPy) references,
``*_numba`` the kernels (float32 and float64 NumPy arrays), and ``relu`` / ``relu_grad``
dispatch.
"""
import numpy as np

from lezero.kernels import argcheck, enabled, jit
from lezero.runtime import policy, run_elementwise

__all__ = ["relu", "relu_ref", "relu_numba", "relu_grad", "relu_grad_ref", "relu_grad_numba"]


def relu_ref(x):
    """``max(x, 0)`` elementwise, NaN kept (a raw array)."""
    from lezero.cuda import get_array_module
    return get_array_module(x).maximum(x, 0)


@jit(cache=True, nogil=True, error_model="numpy")
def _forward(x, out):
    zero = out.dtype.type(0)
    for i in range(x.size):
        out[i] = zero if x[i] <= 0 else x[i]      # a select: the loop vectorises


def relu_numba(x):
    """``relu_ref`` as one Numba pass (a float32 or float64 NumPy array)."""
    argcheck.arrays("relu_numba", x=x)
    argcheck.floats("relu_numba", "x", x)
    return _relu(x)


def _relu(x):
    out = np.empty(x.shape, x.dtype)
    run_elementwise(_forward, _flat(x), out.reshape(-1),
                    min_part=policy.cheap_min_part_items)
    return out


def _flat(a):
    return np.ascontiguousarray(a).reshape(-1)


def _kernel_takes(*arrays):
    return arrays[0].dtype.kind == "f" and arrays[0].dtype.itemsize >= 4 \
        and all(a.dtype == arrays[0].dtype for a in arrays) and enabled(*arrays)


def relu(x):
    """``max(x, 0)``: the kernel for float NumPy arrays, else the reference."""
    return _relu(x) if _kernel_takes(x) else relu_ref(x)


def relu_grad_ref(x, gy):
    """``gy`` where ``x > 0``, else 0 (raw arrays of one shape)."""
    from lezero.cuda import get_array_module
    return get_array_module(x).where(x > 0, gy, 0).astype(gy.dtype, copy=False)


@jit(cache=True, nogil=True, error_model="numpy")
def _grad(x, gy, out):
    zero = out.dtype.type(0)
    for i in range(x.size):
        out[i] = gy[i] if x[i] > 0 else zero      # a select: the loop vectorises


def relu_grad_numba(x, gy):
    """``relu_grad_ref`` as one Numba pass (float NumPy arrays of one shape: the kernel
    reads ``gy[i]`` for every element of ``x``)."""
    argcheck.arrays("relu_grad_numba", x=x, gy=gy)
    argcheck.floats("relu_grad_numba", "gy", gy)
    argcheck.same_shape("relu_grad_numba", "x", x, "gy", gy)
    return _relu_grad(x, gy)


def _relu_grad(x, gy):
    out = np.empty(gy.shape, gy.dtype)
    run_elementwise(_grad, _flat(x), _flat(gy), out.reshape(-1),
                    min_part=policy.cheap_min_part_items)
    return out


def relu_grad(x, gy):
    """``gy`` where ``x > 0``, else 0: the kernel for float NumPy arrays, else the
    reference; ``x`` and ``gy`` must have one shape on either path."""
    argcheck.same_shape("relu_grad", "x", x, "gy", gy)
    return _relu_grad(x, gy) if _kernel_takes(x, gy) else relu_grad_ref(x, gy)
