"""What ``cross_entropy`` and ``nll_loss`` share: the target, its checks and the reduction.

Both see the target as a distribution ``q`` over the C classes at every position (a sample,
or a sample and a spatial index for inputs of shape (N, C, d1, ...)):

* class indices: ``q = (1 - ls) * weight[y] * onehot(y) + ls / C * weight``, zero where
  ``y == ignore_index`` (``ls`` is the label smoothing);
* probabilities: ``q = weight * ((1 - ls) * t + ls / C)``.

The loss at a position is ``-sum_c q_c log softmax(x)_c = qsum * logsumexp(x) - q . x``,
so the forward needs one log-softmax pass and no log-probability array, and the gradient
is ``scale * (qsum * softmax(x) - q)``, computed from the saved exponentials without
recomputing them.  ``scale`` is the upstream gradient, divided for 'mean' by PyTorch's
denominator: the summed weight of the non-ignored targets (class indices) or the number of
positions (probabilities).

Out-of-range class indices raise a ValueError for host (NumPy) targets.  On a device the
check would cost a synchronization per call, so it is not made: the positions holding
such an index get a NaN weight instead, and the loss and its gradient come out NaN there
(a device-side assertion, without the host round trip).
"""
import numpy as np

from lezero import cuda
from lezero.backends import get_backend
from lezero.core import Variable
from lezero.functions.common import as_variable, data_of, xp_of
from lezero.functions.reduction import sum as _sum
from lezero.functions.shape import reshape
from lezero.utils.checks import check_array, check_float_array

__all__ = ["ClassTarget", "ProbTarget", "prepare", "batched", "reduce_array", "scale_of",
           "grad_of_gy"]


# ----- the target, seen as a class distribution q per position -------------------------

class ClassTarget:
    """Class-index targets: ``q`` is kept sparse, as the weight of the target class at
    each position (``coef``) plus, with label smoothing, ``smooth * weight[c]`` for all c."""

    def __init__(self, y, x_shape, dtype, weight, ignore_index, smoothing):
        xp = xp_of(y)
        n_classes = x_shape[1]
        valid = y != ignore_index
        bad = None
        if not get_backend(y).is_host:  # on a device: no sync to check the range (see above)
            in_range = (y >= 0) & (y < n_classes)
            bad, valid = valid & ~in_range, valid & in_range
        y = xp.where(valid, y, 0)
        vf = valid.astype(dtype)
        w_y = vf if weight is None else weight[y] * vf
        if bad is not None:
            w_y = xp.where(bad, np.nan, w_y)
        # x[index] picks x[n, y[n, d...], d...] out of an (N, C, d...) array.
        grids = [xp.arange(s).reshape((1,) * k + (s,) + (1,) * (y.ndim - k - 1))
                 for k, s in enumerate(y.shape)]
        self.index = (grids[0], y) + tuple(grids[1:])
        self.x_shape = x_shape
        self.weight = weight
        self.class_shape = (1, n_classes) + (1,) * (len(x_shape) - 2)
        self.coef = w_y * (1 - smoothing) if smoothing else w_y
        self.smooth = vf * (smoothing / n_classes) if smoothing else None
        self.qsum = self.coef
        if smoothing:
            wsum = n_classes if weight is None else weight.sum()
            self.qsum = self.coef + self.smooth * wsum
        self.denom = w_y.sum()

    def dot(self, x):
        """sum_c q_c x_c at every position."""
        out = self.coef * x[self.index]
        if self.smooth is not None:
            xw = x if self.weight is None else x * self.weight.reshape(self.class_shape)
            out += self.smooth * xw.sum(axis=1)
        return out

    def add_scaled(self, g, scale):
        """g += scale * q, in place (scale: a 0-d array or one value per position)."""
        g[self.index] += scale * self.coef
        if self.smooth is not None:
            s = xp_of(g).expand_dims(scale * self.smooth, 1)
            g += s if self.weight is None else s * self.weight.reshape(self.class_shape)

    def dense(self):
        xp = xp_of(self.coef)
        q = xp.zeros(self.x_shape, dtype=self.coef.dtype)
        self.add_scaled(q, xp.ones((), dtype=q.dtype))
        return q


class ProbTarget:
    """Probability targets: ``q`` is a dense array of the input's shape."""

    def __init__(self, t, weight, smoothing):
        n_classes = t.shape[1]
        q = t * (1 - smoothing) + smoothing / n_classes if smoothing else t
        if weight is not None:
            q = q * weight.reshape((1, n_classes) + (1,) * (t.ndim - 2))
        self.q = q
        self.qsum = q.sum(axis=1)
        self.denom = cuda.as_array(t.size // n_classes, like=t)    # no upload per call

    def dot(self, x):
        return (self.q * x).sum(axis=1)

    def add_scaled(self, g, scale):
        g += xp_of(g).expand_dims(scale, 1) * self.q if scale.ndim else scale * self.q

    def dense(self):
        return self.q


def reduce_array(loss, reduction, denom):
    if reduction == "none":
        return loss
    total = loss.sum()
    return xp_of(loss).asarray(total if reduction == "sum" else total / denom, dtype=loss.dtype)


def scale_of(gy, reduction, denom):
    """The per-position factor of the gradient: gy, or gy / denom for 'mean'."""
    return gy / denom if reduction == "mean" else gy


def grad_of_gy(products, reduction, denom):
    """d(loss gradient)/d(gy), contracted: ``products`` = ggx * (d gx / d scale)."""
    if reduction == "none":
        return _sum(products, axis=1)
    g = _sum(products)
    return g / denom if reduction == "mean" else g


# ----- argument checks -------------------------------------------------------------------

def check_weight(op, weight, n_classes, x):
    if weight is None:
        return None
    if not isinstance(weight, Variable) and not isinstance(weight, cuda.array_types()):
        # weight is the third positional argument (PyTorch's order): an int here was
        # almost certainly meant as ignore_index.
        example = weight if isinstance(weight, (int, np.integer)) else -100
        raise TypeError(f"{op}: weight must be an array with one weight per class, got "
                        f"{type(weight).__name__} {weight!r}; weight is the third positional "
                        f"argument, as in PyTorch, so pass ignore_index by keyword: "
                        f"{op}(input, target, ignore_index={example!r})")
    w = check_float_array(op, "weight", weight)
    if w.shape != (n_classes,):
        raise ValueError(f"{op}: weight must have shape ({n_classes},) (one per class), "
                         f"got {w.shape}")
    return w.astype(x.dtype, copy=False)


def check_class_indices(op, x, t, ignore_index):
    """Shape, dtype and range of a class-index target."""
    expected = () if x.ndim == 1 else x.shape[:1] + x.shape[2:]
    if t.shape != expected:
        raise ValueError(f"{op}: class-index target must have shape {expected} for input of "
                         f"shape {x.shape}, got {t.shape}")
    if isinstance(ignore_index, bool) or not isinstance(ignore_index, (int, np.integer)):
        raise TypeError(f"{op}: ignore_index must be an int, got {type(ignore_index).__name__}")
    if not get_backend(t).is_host:
        return                      # a device target: ClassTarget marks bad indices NaN
    n_classes = x.shape[0] if x.ndim == 1 else x.shape[1]
    bad = (t != ignore_index) & ((t < 0) | (t >= n_classes))
    if bad.any():
        first = int(t[bad].ravel()[0])
        raise ValueError(f"{op}: target index {first} is out of range for {n_classes} classes "
                         f"(expected 0 <= index < {n_classes}, or ignore_index={ignore_index})")


def prepare(op, input, target, weight, ignore_index, allow_probs):
    """Validate; return (x array, target array, weight array or None, probs?)."""
    x = check_float_array(op, "input", input)
    if x.ndim == 0:
        raise ValueError(f"{op}: input must have shape (C,) or (N, C, d1, ...), got a 0-d "
                         "array")
    t = check_array(op, "target", target)
    n_classes = x.shape[0] if x.ndim == 1 else x.shape[1]
    w = check_weight(op, weight, n_classes, x)
    if t.dtype.kind == "f" and allow_probs:
        if t.shape != x.shape:
            raise ValueError(f"{op}: a probability target must have the input's shape "
                             f"{x.shape}, got {t.shape}; class indices must be integers "
                             "(pass target.astype(np.int64))")
        if t.dtype != x.dtype:
            raise TypeError(f"{op}: probability target has dtype {t.dtype} but input has "
                            f"dtype {x.dtype}")
        return x, t, w, True
    if t.dtype.kind not in "iu":
        kinds = "integer class indices" + (" or float probabilities" if allow_probs else "")
        raise TypeError(f"{op}: target must hold {kinds}, got dtype {t.dtype}")
    check_class_indices(op, x, t, ignore_index)
    return x, t, w, False


def batched(input, target, probs):
    """Give an unbatched (C,) input a batch axis of 1 (target too)."""
    x = input if isinstance(input, Variable) else as_variable(input)
    x = reshape(x, (1,) + x.shape)
    if probs and isinstance(target, Variable):
        return x, reshape(target, (1,) + target.shape)
    return x, data_of(target)[None]
