"""The strong-Wolfe line search L-BFGS uses (Nocedal & Wright, Algorithms 3.5 and 3.6).

Along a descent direction ``d`` from ``x`` it looks for a step ``t`` with

* sufficient decrease:  f(x + t d) <= f(x) + c1 t g.d          (Armijo)
* curvature:            |g(x + t d).d| <= c2 |g.d|

first by growing the step until a bracket holding such a point is found, then by
shrinking the bracket ("zoom"), each trial step the minimiser of the cubic through the
two ends' values and slopes.  The constants and safeguards are PyTorch's, so that
``LBFGS(..., line_search_fn="strong_wolfe")`` takes the same steps as torch's.
"""
import math

from lezero import cuda

__all__ = ["cubic_interpolate", "strong_wolfe"]


def cubic_interpolate(x1, f1, g1, x2, f2, g2, bounds=None):
    """The minimiser of the cubic with values ``f1, f2`` and slopes ``g1, g2`` at ``x1, x2``,
    clipped to ``bounds`` (default: between the two points); their midpoint when the cubic
    has no minimum."""
    lo, hi = bounds if bounds is not None else (min(x1, x2), max(x1, x2))
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1 ** 2 - g1 * g2
    if d2_square < 0:
        return (lo + hi) / 2.0
    d2 = math.sqrt(d2_square)
    if x1 <= x2:
        pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    else:
        pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
    return min(max(pos, lo), hi)


class _Point:
    """One trial step: ``t``, the loss there, its flat gradient and the slope g.d."""
    __slots__ = ("t", "f", "g", "gtd")

    def __init__(self, t, f, g, gtd):
        self.t, self.f, self.g, self.gtd = t, f, g, gtd


def _bracket(evaluate, t, f, g, gtd, c1, c2, max_ls):
    """Grow the step until an interval holds a strong-Wolfe point.  Returns
    ``(points, done, evals)``: one point when it already satisfies both conditions."""
    prev = _Point(0.0, f, g, gtd)
    new = evaluate(t)
    evals, ls_iter = 1, 0
    while ls_iter < max_ls:
        if new.f > f + c1 * new.t * gtd or (ls_iter > 1 and new.f >= prev.f):
            return [prev, new], False, evals, ls_iter
        if abs(new.gtd) <= -c2 * gtd:
            return [new], True, evals, ls_iter
        if new.gtd >= 0:
            return [prev, new], False, evals, ls_iter
        lo, hi = new.t + 0.01 * (new.t - prev.t), new.t * 10
        t = cubic_interpolate(prev.t, prev.f, prev.gtd, new.t, new.f, new.gtd, bounds=(lo, hi))
        prev, new = new, evaluate(t)
        evals += 1
        ls_iter += 1
    # out of trials: the interval from the start to the last step
    return [_Point(0.0, f, g, gtd), new], False, evals, ls_iter


def _zoom_step(pts, insuf_progress):
    """The next trial step inside the bracket, kept away from its ends (PyTorch's
    safeguard: at least 10% of the interval from either end, unless progress allows)."""
    a, b = pts
    t = cubic_interpolate(a.t, a.f, a.gtd, b.t, b.f, b.gtd)
    top, bottom = max(a.t, b.t), min(a.t, b.t)
    eps = 0.1 * (top - bottom)
    if min(top - t, t - bottom) < eps:
        if insuf_progress or t >= top or t <= bottom:
            t = top - eps if abs(t - top) < abs(t - bottom) else bottom + eps
            return t, False
        return t, True
    return t, False


def strong_wolfe(obj_func, x, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9,
                 max_ls=25):
    """Search along ``d`` from the parameters ``x`` (loss ``f``, flat gradient ``g``,
    slope ``gtd = g.d``), starting at step ``t``.  ``obj_func(x, t, d)`` returns the loss
    and flat gradient at ``x + t d``.  Returns ``(f_new, g_new, t, evaluations)``."""
    xp = cuda.get_array_module(d)
    d_norm = float(abs(d).max())

    def evaluate(step):
        f_new, g_new = obj_func(x, step, d)
        return _Point(step, f_new, g_new, float(xp.dot(g_new, d)))

    pts, done, evals, ls_iter = _bracket(evaluate, t, f, g.copy(), gtd, c1, c2, max_ls)
    if done:
        return pts[0].f, pts[0].g, pts[0].t, evals
    insuf_progress = False
    low, high = (0, 1) if pts[0].f <= pts[-1].f else (1, 0)
    while not done and ls_iter < max_ls:
        if abs(pts[1].t - pts[0].t) * d_norm < tolerance_change:
            break
        step, insuf_progress = _zoom_step(pts, insuf_progress)
        new = evaluate(step)
        evals += 1
        ls_iter += 1
        if new.f > f + c1 * step * gtd or new.f >= pts[low].f:
            pts[high] = new
            low, high = (0, 1) if pts[0].f <= pts[1].f else (1, 0)
        else:
            if abs(new.gtd) <= -c2 * gtd:
                done = True
            elif new.gtd * (pts[high].t - pts[low].t) >= 0:
                pts[high] = pts[low]
            pts[low] = new
    best = pts[low]
    return best.f, best.g, best.t, evals
