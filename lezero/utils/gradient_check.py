"""Numerical gradients and the checks every operator's tests use.

``gradient_check(f, *xs)`` compares LeZero's backward with float64 central differences;
``check_double_backward(f, *xs)`` does the same for the gradient of the gradient.
"""
import numpy as np

from lezero import cuda
from lezero.core import Variable, grad


def _as_float64_variables(xs):
    out = []
    for i, x in enumerate(xs):
        arr = x.data if isinstance(x, Variable) else x
        arr = cuda.as_numpy(arr) if not isinstance(arr, np.ndarray) else arr
        if not np.issubdtype(np.asarray(arr).dtype, np.floating):
            raise TypeError(f"gradient_check: input {i} must be floating point, got "
                            f"{np.asarray(arr).dtype}")
        out.append(Variable(np.array(arr, dtype=np.float64)))
    return out


def numerical_grad(f, *xs, eps=1e-6, gys=None):
    """Central-difference gradient of ``sum_i sum(f(*xs)[i] * gys[i])`` for each input array.

    ``xs`` are float64 NumPy arrays; ``gys`` default to ones.  Returns a list of arrays.
    """
    xs = [np.array(x, dtype=np.float64) for x in xs]

    def value():
        # Leaves that require grad, so f may itself differentiate (check_double_backward).
        ys = f(*[Variable(x) for x in xs])
        ys = ys if isinstance(ys, (list, tuple)) else [ys]
        total = 0.0
        for k, y in enumerate(ys):
            y = cuda.as_numpy(y.data if isinstance(y, Variable) else y).astype(np.float64)
            total += float((y * (1.0 if gys is None else gys[k])).sum())
        return total

    grads = []
    for x in xs:
        g = np.zeros_like(x)
        it = np.nditer(x, flags=["multi_index"])
        for _ in it:
            idx = it.multi_index
            orig = x[idx]
            x[idx] = orig + eps
            plus = value()
            x[idx] = orig - eps
            minus = value()
            x[idx] = orig
            g[idx] = (plus - minus) / (2 * eps)
        grads.append(g)
    return grads


def gradient_check(f, *xs, eps=1e-6, rtol=1e-5, atol=1e-6, gys=None, seed=0):
    """Check ``f``'s backward against central differences in float64.

    ``f`` takes Variables and returns a Variable (or a tuple).  A random upstream gradient
    is used (so every output element matters).  Raises AssertionError naming the input,
    the worst element and both values; returns True otherwise.
    """
    vs = _as_float64_variables(xs)
    ys = f(*vs)
    ys = list(ys) if isinstance(ys, (list, tuple)) else [ys]
    rng = np.random.default_rng(seed)
    if gys is None:
        gys = [rng.standard_normal(y.shape) for y in ys]
    # An output computed without any input (e.g. the gradient of a linear function, in
    # check_double_backward) has a zero derivative: compare that with the numbers.
    live = [(y, g) for y, g in zip(ys, gys) if isinstance(y, Variable) and y.requires_grad]
    if live:
        analytic = grad([y for y, _ in live], vs, grad_outputs=[g for _, g in live],
                        allow_unused=True)
    else:
        analytic = [None] * len(vs)
    numeric = numerical_grad(f, *[v.data for v in vs], eps=eps, gys=gys)
    for i, (a, n) in enumerate(zip(analytic, numeric)):
        a = np.zeros_like(n) if a is None else cuda.as_numpy(a.data)
        if a.shape != n.shape:
            raise AssertionError(f"gradient_check: input {i}: gradient shape {a.shape} != "
                                 f"input shape {n.shape}")
        err = np.abs(a - n) - (atol + rtol * np.abs(n))
        if np.any(err > 0) or not np.all(np.isfinite(a)):
            worst = np.unravel_index(np.nanargmax(np.where(np.isfinite(a), err, np.inf)), a.shape)
            raise AssertionError(
                f"gradient_check: input {i} (shape {n.shape}) differs at index {worst}: "
                f"backward gives {a[worst]!r}, central differences give {n[worst]!r} "
                f"(rtol={rtol}, atol={atol})")
    return True


def check_double_backward(f, *xs, eps=1e-6, rtol=1e-4, atol=1e-5, seed=0):
    """Check second derivatives: the gradient of ``<grad f(x), v>`` against central
    differences of the first-order gradient (float64)."""
    vs = _as_float64_variables(xs)
    rng = np.random.default_rng(seed + 1)
    ys = f(*vs)
    ys = list(ys) if isinstance(ys, (list, tuple)) else [ys]
    gys = [rng.standard_normal(y.shape) for y in ys]
    ggs = [rng.standard_normal(v.shape) for v in vs]

    def first_order(*inputs):
        outs = f(*inputs)
        outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
        gs = grad(outs, list(inputs), grad_outputs=gys, create_graph=True, allow_unused=True)
        total = None
        for g, gg in zip(gs, ggs):
            if g is None:
                continue
            term = (g * gg).sum()
            total = term if total is None else total + term
        if total is None:
            raise AssertionError("check_double_backward: f has no gradient to differentiate")
        return total

    return gradient_check(first_order, *vs, eps=eps, rtol=rtol, atol=atol, gys=[np.array(1.0)],
                          seed=seed)
