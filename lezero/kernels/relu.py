"""ReLU's gradient in one pass: ``relu_grad(x, gy)`` = ``gy`` where ``x > 0``, else 0.

Written with NumPy operators the gradient is three passes and two temporaries (the mask
``x > 0``, its cast to the data's dtype, the product); the kernel reads ``x`` and ``gy``
once and writes the result once.  NaN in ``x`` gives a zero gradient, as in PyTorch
(``NaN > 0`` is false).  The forward needs no kernel: ``np.maximum(x, 0)`` is one pass.

``relu_grad_ref`` is the NumPy (and CuPy) reference, ``relu_grad_numba`` the kernel (float32
and float64 NumPy arrays), ``relu_grad`` dispatches.
"""
import numpy as np

from lezero.kernels import enabled, jit

__all__ = ["relu_grad", "relu_grad_ref", "relu_grad_numba"]


def relu_grad_ref(x, gy):
    """``gy`` where ``x > 0``, else 0 (raw arrays of one shape)."""
    from lezero.cuda import get_array_module
    return get_array_module(x).where(x > 0, gy, 0).astype(gy.dtype, copy=False)


@jit(cache=True, error_model="numpy")
def _grad(x, gy, out):
    zero = out.dtype.type(0)
    for i in range(x.size):
        out[i] = gy[i] if x[i] > 0 else zero      # a select: the loop vectorises


def relu_grad_numba(x, gy):
    """``relu_grad_ref`` as one Numba pass (NumPy arrays of one shape)."""
    out = np.empty(gy.shape, gy.dtype)
    _grad(np.ascontiguousarray(x).reshape(-1), np.ascontiguousarray(gy).reshape(-1),
          out.reshape(-1))
    return out


def relu_grad(x, gy):
    """``gy`` where ``x > 0``, else 0: the kernel for float NumPy arrays, else the
    reference."""
    if x.dtype == gy.dtype and x.dtype.kind == "f" and x.dtype.itemsize >= 4 \
            and enabled(x, gy):
        return relu_grad_numba(x, gy)
    return relu_grad_ref(x, gy)
