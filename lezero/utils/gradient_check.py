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


def gradient_check(f, *xs, eps=1e-6, rtol=1e-5, atol=1e-6, gys=None, seed=0, nan_ok=False):
    """Check ``f``'s backward against central differences in float64.

    ``f`` takes Variables and returns a Variable (or a tuple).  A random upstream gradient
    is used (so every output element matters).  Raises AssertionError naming the input,
    the worst element and both values; returns True otherwise.

    A non-finite value on either side fails the check (a NaN compares as "not greater"
    than any tolerance, so it must be caught explicitly).  ``nan_ok=True`` accepts the
    positions where both sides are NaN, or both the same infinity -- for functions whose
    derivative is undefined there on purpose.
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
        _compare(i, a, n, rtol, atol, nan_ok)
    return True


def _compare(i, a, n, rtol, atol, nan_ok):
    """Raise AssertionError at the worst element of analytic ``a`` vs numeric ``n``."""
    finite = np.isfinite(a) & np.isfinite(n)
    with np.errstate(invalid="ignore"):
        err = np.where(finite, np.abs(a - n) - (atol + rtol * np.abs(n)), np.inf)
    if nan_ok:          # the same non-finite value on both sides is agreement
        same = (np.isnan(a) & np.isnan(n)) | (np.isinf(a) & (a == n))
        err = np.where(same, -np.inf, err)
    if not np.any(err > 0):
        return
    worst = tuple(int(k) for k in np.unravel_index(np.argmax(err), a.shape))
    why = "" if finite[worst] else " (a non-finite value; pass nan_ok=True if expected)"
    raise AssertionError(
        f"gradient_check: input {i} (shape {n.shape}) differs at index {worst}: "
        f"backward gives {float(a[worst])!r}, central differences give {float(n[worst])!r}{why} "
        f"(rtol={rtol}, atol={atol})")


def check_double_backward(f, *xs, eps=1e-6, rtol=1e-4, atol=1e-5, seed=0, nan_ok=False):
    """Check second derivatives against central differences of the first-order gradient
    (float64).

    The first-order gradient is taken of ``sum(gy * y + w * y**2 / 2)`` over the outputs
    ``y = f(x)``, i.e. with the upstream gradient ``gy + w * y`` depending on ``x``, and
    then contracted with a random ``v``.  For a linear ``f`` the gradient of ``sum(gy * y)``
    alone does not depend on ``x`` and its check would pass whatever ``backward`` did; the
    square term makes the check exercise the derivative of ``backward`` with respect to
    its upstream gradient too, for every operator."""
    vs = _as_float64_variables(xs)
    rng = np.random.default_rng(seed + 1)
    ys = f(*vs)
    ys = list(ys) if isinstance(ys, (list, tuple)) else [ys]
    gys = [rng.standard_normal(y.shape) for y in ys]
    ws = [rng.uniform(0.5, 1.5, y.shape) for y in ys]
    ggs = [rng.standard_normal(v.shape) for v in vs]

    def first_order(*inputs):
        outs = f(*inputs)
        outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
        pairs = [(y, gy + w * y) for y, gy, w in zip(outs, gys, ws)
                 if isinstance(y, Variable) and y.requires_grad and y.dtype.kind == "f"]
        if not pairs:
            raise AssertionError("check_double_backward: f has no gradient to differentiate")
        gs = grad([y for y, _ in pairs], list(inputs), grad_outputs=[g for _, g in pairs],
                  create_graph=True, allow_unused=True)
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
                          seed=seed, nan_ok=nan_ok)
