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


def check_adam_args(where, param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, beta1, beta2,
                    step):
    """What ``adam_step_`` relies on: every array of the parameter's shape (the kernel walks
    the parameter over each), ``beta1``/``beta2`` in [0, 1) and ``step`` an int >= 1 (the
    bias corrections divide by ``1 - beta ** step``).  ValueError naming the argument."""
    arrays = {"grad": grad, "exp_avg": exp_avg, "exp_avg_sq": exp_avg_sq,
              "max_exp_avg_sq": max_exp_avg_sq}
    for name, a in arrays.items():
        if a is not None and tuple(a.shape) != tuple(param.shape):
            raise ValueError(f"{where}: {name} has shape {tuple(a.shape)}, the parameter "
                             f"{tuple(param.shape)}")
    for name, beta in (("beta1", beta1), ("beta2", beta2)):
        if not 0.0 <= beta < 1.0:
            raise ValueError(f"{where}: {name} must be in [0, 1), got {beta!r}")
    if isinstance(step, bool) or not isinstance(step, (int, np.integer)) or step < 1:
        raise ValueError(f"{where}: step must be an int >= 1, got {step!r}")


def _check_kernel_arrays(param, arrays):
    """The kernel's own needs: NumPy arrays of one floating dtype, C-contiguous
    (it reads them as flat vectors), the parameter and the moments writeable."""
    for name, a in arrays.items():
        if not isinstance(a, np.ndarray):
            raise TypeError(f"adam_step_numba: {name} must be a NumPy array, got "
                            f"{type(a).__name__}")
        if a.dtype != param.dtype or a.dtype.kind != "f":
            raise TypeError(f"adam_step_numba: {name} has dtype {a.dtype}; every array must "
                            f"have the parameter's floating dtype ({param.dtype})")
        if not a.flags.c_contiguous or (name != "grad" and not a.flags.writeable):
            raise ValueError(f"adam_step_numba: {name} must be a C-contiguous"
                             f"{'' if name == 'grad' else ', writeable'} array")


def adam_step_numba(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, *, lr, beta1, beta2,
                    eps, weight_decay, decoupled, maximize, step):
    """Update ``param`` and the moment buffers in place (C-contiguous arrays of one dtype;
    ``max_exp_avg_sq`` None unless AMSGrad).  ``step`` is the 1-based step count."""
    arrays = {"param": param, "grad": grad, "exp_avg": exp_avg, "exp_avg_sq": exp_avg_sq}
    if max_exp_avg_sq is not None:
        arrays["max_exp_avg_sq"] = max_exp_avg_sq
    _check_kernel_arrays(param, arrays)
    check_adam_args("adam_step_numba", param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq,
                    beta1, beta2, step)
    _run_adam(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, lr=lr, beta1=beta1,
              beta2=beta2, eps=eps, weight_decay=weight_decay, decoupled=decoupled,
              maximize=maximize, step=step)


def _run_adam(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, *, lr, beta1, beta2, eps,
              weight_decay, decoupled, maximize, step):
    """The kernel call, on arrays already checked (``adam_step_numba``, ``adam_step_``)."""
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
    as ``adam_step_ref``.  Shapes, betas and ``step`` are checked first
    (``check_adam_args``): the kernel reads without bounds checks."""
    check_adam_args("adam_step_", param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq,
                    hyper["beta1"], hyper["beta2"], hyper["step"])
    if (type(grad) is np.ndarray and not grad.flags.c_contiguous
            and type(param) is np.ndarray and param.flags.c_contiguous):
        # The gradient of a weight used transposed (GPT-2's Conv1D: linear(x, w.T)) is a
        # transposed view: one copy lets the one-pass kernel run instead of ~12 passes.
        grad = np.ascontiguousarray(grad)
    arrays = [a for a in (param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq) if a is not None]
    fused = (param.dtype.kind == "f" and enabled(*arrays)
             and all(a.dtype == param.dtype and a.flags.c_contiguous for a in arrays)
             and all(a.flags.writeable for a in arrays if a is not grad))
    (_run_adam if fused else adam_step_ref)(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq,
                                            **hyper)
