"""Gradient clipping: ``clip_grad_norm_`` and ``clip_grad_value_`` (PyTorch's
``torch.nn.utils`` functions; ``lezero.optim`` re-exports them too).

Both scale ``p.grad`` in place.  The backward engine gives every leaf's ``.grad`` its own
writable memory, so scaling one gradient never touches another.
"""
import math

import numpy as np

from lezero import cuda
from lezero.core import Variable


def _grads(parameters, name):
    if isinstance(parameters, Variable):
        parameters = [parameters]
    grads, seen = [], set()
    for i, p in enumerate(parameters):
        if not isinstance(p, Variable):
            raise TypeError(f"{name}: parameters[{i}] must be a Parameter or Variable, "
                            f"got {type(p).__name__}")
        if p.grad is not None and id(p.grad.data) not in seen:
            seen.add(id(p.grad.data))       # a gradient shared by two entries is scaled once
            grads.append(p.grad.data)
    return grads


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False):
    """Scale the gradients so that their joint ``norm_type``-norm is at most ``max_norm``.

    The norm is taken over all gradients together, as if concatenated into one vector
    (``norm_type`` may be ``inf``).  Every gradient is multiplied by
    ``min(1, max_norm / (total_norm + 1e-6))``.  Returns the total norm before clipping as a
    0-d Variable (``.item()`` gives the number).  A NaN or infinite norm raises
    RuntimeError when ``error_if_nonfinite`` is True; otherwise the gradients become NaN,
    as in PyTorch.
    """
    grads = _grads(parameters, "clip_grad_norm_")
    max_norm, norm_type = float(max_norm), float(norm_type)
    if max_norm < 0:
        raise ValueError(f"clip_grad_norm_: max_norm must be >= 0, got {max_norm}")
    if norm_type <= 0 and not math.isinf(norm_type):
        raise ValueError(f"clip_grad_norm_: norm_type must be positive or inf, got {norm_type}")
    if not grads:
        return Variable(np.zeros((), np.float32), requires_grad=False)
    xp = cuda.get_array_module(grads[0])
    if math.isinf(norm_type):
        norms = [xp.abs(g).max() if g.size else xp.zeros((), g.dtype) for g in grads]
        total = xp.stack([xp.asarray(n, dtype=grads[0].dtype) for n in norms]).max()
    else:
        norms = [_vector_norm(xp, g, norm_type) for g in grads]
        total = _vector_norm(xp, xp.stack([xp.asarray(n, dtype=grads[0].dtype) for n in norms]),
                             norm_type)
    total_value = float(total)
    if error_if_nonfinite and not math.isfinite(total_value):
        raise RuntimeError(f"clip_grad_norm_: the total norm of order {norm_type} of the "
                           f"gradients is {total_value}, so they cannot be clipped (pass "
                           "error_if_nonfinite=False to clip anyway)")
    # min() keeps a NaN coefficient (NaN compares False), so NaN norms poison the gradients
    # as in PyTorch rather than passing silently.
    coef = min(max_norm / (total_value + 1e-6), 1.0)
    if coef != 1.0:           # PyTorch multiplies by 1.0 as well; skipping it changes nothing
        for g in grads:
            g *= coef
    return Variable(xp.asarray(total), requires_grad=False)


def _vector_norm(xp, x, p):
    """The p-norm of all entries of ``x`` (a 0-d array)."""
    if p == 2.0:
        flat = x.reshape(-1)
        return xp.sqrt(xp.dot(flat, flat)) if x.size else xp.zeros((), x.dtype)
    if p == 1.0:
        return xp.abs(x).sum()
    return (xp.abs(x) ** p).sum() ** (1.0 / p)


def clip_grad_value_(parameters, clip_value):
    """Clamp every gradient entry into ``[-clip_value, clip_value]`` in place."""
    clip_value = float(clip_value)
    if clip_value < 0:
        raise ValueError(f"clip_grad_value_: clip_value must be >= 0, got {clip_value}")
    for g in _grads(parameters, "clip_grad_value_"):
        cuda.get_array_module(g).clip(g, -clip_value, clip_value, out=g)
