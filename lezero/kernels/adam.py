"""One Adam / AdamW step on one parameter: ``adam_step_`` (the dispatcher the optimizer
calls), ``adam_step_ref`` (NumPy/CuPy) and ``adam_step_numba`` (one pass).

The reference is about a dozen in-place array operations, each a pass over the parameter
and a trip through NumPy's dispatch.  For a small Transformer's 28 parameters that was
2-3 ms of every training step; the kernel does the same arithmetic, in the same order and
in the parameter's dtype, element by element.

No fastmath: the update has no reduction to reassociate, LLVM vectorises it as it is, and
exact IEEE order keeps the ten-step parity with ``torch.optim`` (tests/optim).
"""
import math

import numpy as np

from lezero.kernels import enabled, jit

__all__ = ["adam_step_", "adam_step_ref", "adam_step_numba"]


def adam_step_ref(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, *, lr, beta1, beta2, eps,
                  weight_decay, decoupled, maximize, step):
    """Update ``param`` and the moment buffers in place (PyTorch's order of operations);
    ``max_exp_avg_sq`` None unless AMSGrad, ``step`` the 1-based step count."""
    from lezero.cuda import get_array_module
    xp = get_array_module(param)
    wd = weight_decay
    if decoupled and wd:
        param *= 1.0 - lr * wd             # AdamW: decay the weights, not the gradient
        wd = 0
    g = -grad if maximize else grad
    if wd:
        g = g + param * wd                 # L2: the decay enters the gradient
    scratch = xp.empty_like(param)         # out=: 0-d parameters stay arrays
    xp.subtract(g, exp_avg, out=scratch)   # m += (1 - beta1) (g - m), torch's lerp
    scratch *= 1.0 - beta1
    exp_avg += scratch
    xp.multiply(g, g, out=scratch)         # v = beta2 v + (1 - beta2) g^2
    scratch *= 1.0 - beta2
    exp_avg_sq *= beta2
    exp_avg_sq += scratch
    v = exp_avg_sq
    if max_exp_avg_sq is not None:
        v = xp.maximum(max_exp_avg_sq, exp_avg_sq, out=max_exp_avg_sq)
    denom = xp.sqrt(v, out=scratch)
    denom /= math.sqrt(1.0 - beta2 ** step)
    denom += eps
    xp.divide(exp_avg, denom, out=scratch)
    scratch *= -(lr / (1.0 - beta1 ** step))
    param += scratch


@jit(cache=True, error_model="numpy")
def _adam(p, g, m, v, vmax, decay, wd, sign, one_minus_beta1, beta2, one_minus_beta2,
          bc2_sqrt, eps, neg_step, amsgrad):
    for i in range(p.size):
        x = p[i] * decay if decay != 1 else p[i]   # decoupled weight decay: 1 - lr wd
        gi = sign * g[i] + wd * x if wd != 0 else sign * g[i]     # maximize, then L2 term
        mi = m[i] + one_minus_beta1 * (gi - m[i])                # lerp, as torch
        vi = v[i] * beta2 + one_minus_beta2 * (gi * gi)
        m[i] = mi
        v[i] = vi
        if amsgrad:
            vi = np.maximum(vmax[i], vi)
            vmax[i] = vi
        p[i] = x + (mi / (np.sqrt(vi) / bc2_sqrt + eps)) * neg_step


def adam_step_numba(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, *, lr, beta1, beta2,
                    eps, weight_decay, decoupled, maximize, step):
    """Update ``param`` and the moment buffers in place (C-contiguous arrays of one dtype;
    ``max_exp_avg_sq`` None unless AMSGrad).  ``step`` is the 1-based step count."""
    f = param.dtype.type        # every scalar in the parameter's dtype, as NumPy's path
    decay, wd = (f(1.0 - lr * weight_decay), f(0)) if decoupled else (f(1), f(weight_decay))
    amsgrad = max_exp_avg_sq is not None
    flat = [a.reshape(-1) for a in (param, grad, exp_avg, exp_avg_sq)]
    vmax = max_exp_avg_sq.reshape(-1) if amsgrad else flat[3]
    # sqrt(v) is divided by sqrt(1 - beta2^t), as NumPy's path and torch do (multiplying by
    # the reciprocal would differ in the last bit).
    _adam(*flat, vmax, decay, wd, f(-1 if maximize else 1), f(1.0 - beta1), f(beta2),
          f(1.0 - beta2), f(math.sqrt(1.0 - beta2 ** step)), f(eps),
          f(-lr / (1.0 - beta1 ** step)), amsgrad)


def adam_step_(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, **hyper):
    """The kernel where it can walk every array as a flat vector (NumPy arrays of one
    float dtype, all C-contiguous, ``enabled``), else the reference; keyword arguments
    as ``adam_step_ref``."""
    arrays = [a for a in (param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq) if a is not None]
    fused = (param.dtype.kind == "f" and enabled(*arrays)
             and all(a.dtype == param.dtype and a.flags.c_contiguous for a in arrays))
    (adam_step_numba if fused else adam_step_ref)(param, grad, exp_avg, exp_avg_sq,
                                                  max_exp_avg_sq, **hyper)
