"""Classification losses: ``cross_entropy`` (fused softmax + cross entropy) and ``nll_loss``.

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
"""
import numpy as np

from lezero import cuda, kernels
from lezero.core import Function, Variable
from lezero.functions.activation.softmax import log_softmax, softmax
from lezero.functions.common import as_variable, data_of, xp_of
from lezero.functions.loss.common import check_reduction
from lezero.functions.reduction import sum as _sum
from lezero.functions.registry import register
from lezero.functions.shape import reshape
from lezero.utils.checks import check_array, check_float_array, check_number

__all__ = ["cross_entropy", "nll_loss"]


# ----- the target, seen as a class distribution q per position -------------------------

class _ClassTarget:
    """Class-index targets: ``q`` is kept sparse, as the weight of the target class at
    each position (``coef``) plus, with label smoothing, ``smooth * weight[c]`` for all c."""

    def __init__(self, y, x_shape, dtype, weight, ignore_index, smoothing):
        xp = xp_of(y)
        n_classes = x_shape[1]
        valid = y != ignore_index
        y = xp.where(valid, y, 0)
        vf = valid.astype(dtype)
        w_y = vf if weight is None else weight[y] * vf
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


class _ProbTarget:
    """Probability targets: ``q`` is a dense array of the input's shape."""

    def __init__(self, t, weight, smoothing):
        n_classes = t.shape[1]
        q = t * (1 - smoothing) + smoothing / n_classes if smoothing else t
        if weight is not None:
            q = q * weight.reshape((1, n_classes) + (1,) * (t.ndim - 2))
        self.q = q
        self.qsum = q.sum(axis=1)
        self.denom = xp_of(t).asarray(t.size // n_classes, dtype=t.dtype)

    def dot(self, x):
        return (self.q * x).sum(axis=1)

    def add_scaled(self, g, scale):
        g += xp_of(g).expand_dims(scale, 1) * self.q if scale.ndim else scale * self.q

    def dense(self):
        return self.q


def _reduce_array(loss, reduction, denom):
    if reduction == "none":
        return loss
    total = loss.sum()
    return xp_of(loss).asarray(total if reduction == "sum" else total / denom, dtype=loss.dtype)


def _scale(gy, reduction, denom):
    """The per-position factor of the gradient: gy, or gy / denom for 'mean'."""
    return gy / denom if reduction == "mean" else gy


def _grad_of_gy(products, reduction, denom):
    """d(loss gradient)/d(gy), contracted: ``products`` = ggx * (d gx / d scale)."""
    if reduction == "none":
        return _sum(products, axis=1)
    g = _sum(products)
    return g / float(denom) if reduction == "mean" else g


# ----- the fused softmax + cross entropy -----------------------------------------------

def _softmax_stats(x):
    """(exp(x - max), 1 / its sum, log-sum-exp) over axis 1; the reference of the kernel
    ``lezero.kernels.softmax.softmax_stats``."""
    xp = xp_of(x)
    m = x.max(axis=1, keepdims=True)
    e = x - m
    xp.exp(e, out=e)
    ssum = e.sum(axis=1, keepdims=True)
    inv_sum = 1 / ssum
    xp.log(ssum, out=ssum)
    ssum += m
    return e, inv_sum, ssum.squeeze(1)


class SoftmaxCrossEntropy(Function):
    """Cross entropy of softmax(x) over axis 1 against a constant target."""

    def __init__(self, target, reduction):
        self.target = target
        self.reduction = reduction

    def forward(self, x):
        if x.ndim == 2 and x.dtype == np.float32 and kernels.enabled(x):
            from lezero.kernels.softmax import softmax_stats
            e, inv_sum, lse = softmax_stats(x)      # one pass per row instead of five
        else:
            e, inv_sum, lse = _softmax_stats(x)
        if self.needs_input_grad[0]:
            # softmax = e * inv_sum; the product is left to the backward, where it joins
            # the one multiplication that makes the gradient (a pass over memory saved).
            self.exp, self.inv_sum = e, inv_sum
        loss = self.target.qsum * lse
        loss -= self.target.dot(x)
        return _reduce_array(loss, self.reduction, self.target.denom)

    def backward(self, gy):
        return SoftmaxCrossEntropyGrad(self)(self.inputs[0], gy)


class SoftmaxCrossEntropyGrad(Function):
    """gx = scale * (qsum * softmax(x) - q): a Function of (x, gy), so it has a gradient."""

    def __init__(self, fwd):
        self.target = fwd.target
        self.reduction = fwd.reduction
        self.exp, self.inv_sum = fwd.exp, fwd.inv_sum

    def forward(self, x, gy):
        xp = xp_of(x)
        t = self.target
        scale = _scale(gy, self.reduction, t.denom)
        gx = self.exp * (xp.expand_dims(scale * t.qsum, 1) * self.inv_sum)
        t.add_scaled(gx, -scale)
        return gx

    def backward(self, ggx):
        x, gy = self.inputs
        t = self.target
        s = softmax(x, axis=1)
        qsum = as_variable(xp_of(x.data).expand_dims(t.qsum, 1))
        g_x = g_gy = None
        if self.needs_input_grad[0]:
            scale = gy if self.reduction != "mean" else gy / float(t.denom)
            if self.reduction == "none":
                scale = reshape(scale, qsum.shape)
            v = ggx * (scale * qsum)
            g_x = s * (v - _sum(s * v, axis=1, keepdims=True))    # softmax's Jacobian
        if self.needs_input_grad[1]:
            g_gy = _grad_of_gy(ggx * (s * qsum - as_variable(t.dense())), self.reduction, t.denom)
        return g_x, g_gy


# ----- nll_loss --------------------------------------------------------------------------

class NLLLoss(Function):
    """-sum_c q_c x_c per position, x being log-probabilities."""

    def __init__(self, target, reduction):
        self.target = target
        self.reduction = reduction

    def forward(self, x):
        return _reduce_array(-self.target.dot(x), self.reduction, self.target.denom)

    def backward(self, gy):
        return NLLLossGrad(self.target, self.reduction)(gy)


class NLLLossGrad(Function):
    """gx = -scale * q: linear in gy, so its own gradient is a contraction with q."""

    def __init__(self, target, reduction):
        self.target = target
        self.reduction = reduction

    def forward(self, gy):
        t = self.target
        gx = xp_of(gy).zeros(t.x_shape, dtype=gy.dtype)
        t.add_scaled(gx, -_scale(gy, self.reduction, t.denom))
        return gx

    def backward(self, ggx):
        products = ggx * as_variable(-self.target.dense())
        return _grad_of_gy(products, self.reduction, self.target.denom)


# ----- argument checks -------------------------------------------------------------------

def _check_weight(op, weight, n_classes, x):
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


def _check_class_indices(op, x, t, ignore_index):
    """Shape, dtype and range of a class-index target."""
    expected = () if x.ndim == 1 else x.shape[:1] + x.shape[2:]
    if t.shape != expected:
        raise ValueError(f"{op}: class-index target must have shape {expected} for input of "
                         f"shape {x.shape}, got {t.shape}")
    if isinstance(ignore_index, bool) or not isinstance(ignore_index, (int, np.integer)):
        raise TypeError(f"{op}: ignore_index must be an int, got {type(ignore_index).__name__}")
    n_classes = x.shape[0] if x.ndim == 1 else x.shape[1]
    bad = (t != ignore_index) & ((t < 0) | (t >= n_classes))
    if bad.any():
        first = int(t[bad].ravel()[0])
        raise ValueError(f"{op}: target index {first} is out of range for {n_classes} classes "
                         f"(expected 0 <= index < {n_classes}, or ignore_index={ignore_index})")


def _prepare(op, input, target, weight, ignore_index, allow_probs):
    """Validate; return (x array, target array, weight array or None, probs?)."""
    x = check_float_array(op, "input", input)
    if x.ndim == 0:
        raise ValueError(f"{op}: input must have shape (C,) or (N, C, d1, ...), got a 0-d "
                         "array")
    t = check_array(op, "target", target)
    n_classes = x.shape[0] if x.ndim == 1 else x.shape[1]
    w = _check_weight(op, weight, n_classes, x)
    if t.dtype.kind == "f" and allow_probs:
        if t.shape != x.shape:
            raise ValueError(f"{op}: a probability target must have the input's shape "
                             f"{x.shape}, got {t.shape}")
        if t.dtype != x.dtype:
            raise TypeError(f"{op}: probability target has dtype {t.dtype} but input has "
                            f"dtype {x.dtype}")
        return x, t, w, True
    if t.dtype.kind not in "iu":
        kinds = "integer class indices" + (" or float probabilities" if allow_probs else "")
        raise TypeError(f"{op}: target must hold {kinds}, got dtype {t.dtype}")
    _check_class_indices(op, x, t, ignore_index)
    return x, t, w, False


def _batched(input, target, probs):
    """Give an unbatched (C,) input a batch axis of 1 (target too)."""
    x = input if isinstance(input, Variable) else as_variable(input)
    x = reshape(x, (1,) + x.shape)
    if probs and isinstance(target, Variable):
        return x, reshape(target, (1,) + target.shape)
    return x, data_of(target)[None]


# ----- the operators -----------------------------------------------------------------------

@register("loss", notes="fused softmax + cross entropy; class-index or probability targets")
def cross_entropy(input, target, weight=None, ignore_index=-100, reduction="mean",
                  label_smoothing=0.0):
    """Cross entropy between softmax(input) over axis 1 and ``target``, as
    ``torch.nn.functional.cross_entropy``.

    ``input``: logits (C,), (N, C) or (N, C, d1, ...).  ``target``: class indices of shape
    (), (N,) or (N, d1, ...), or class probabilities of the input's shape.  ``weight``: one
    rescaling weight per class.  Targets equal to ``ignore_index`` contribute nothing and
    are left out of the 'mean' denominator, which with ``weight`` is the summed weight of
    the targets (PyTorch's weighted mean).  ``label_smoothing`` mixes the target with the
    uniform distribution.  The deprecated ``size_average``/``reduce`` are not supported.
    """
    op = "cross_entropy"
    check_reduction(op, reduction)
    smoothing = check_number(op, "label_smoothing", label_smoothing, 0.0, 1.0)
    x, t, w, probs = _prepare(op, input, target, weight, ignore_index, allow_probs=True)
    if x.ndim == 1:
        xb, tb = _batched(input, target, probs)
        loss = cross_entropy(xb, tb, w, ignore_index, reduction, label_smoothing)
        return reshape(loss, ()) if reduction == "none" else loss
    if probs and isinstance(target, Variable) and target.requires_grad:
        return _cross_entropy_composite(input, target, w, reduction, smoothing)
    if probs:
        q = _ProbTarget(t, w, smoothing)
    else:
        q = _ClassTarget(t, x.shape, x.dtype, w, ignore_index, smoothing)
    return SoftmaxCrossEntropy(q, reduction)(input)


def _cross_entropy_composite(x, t, w, reduction, smoothing):
    """Probability targets that need a gradient: the same loss from differentiable ops."""
    n_classes = t.shape[1]
    if smoothing:
        t = t * (1 - smoothing) + smoothing / n_classes
    if w is not None:
        t = t * as_variable(w.reshape((1, n_classes) + (1,) * (t.ndim - 2)))
    loss = -_sum(t * log_softmax(x, axis=1), axis=1)
    if reduction == "none":
        return loss
    total = _sum(loss)
    return total if reduction == "sum" else total / loss.size


@register("loss")
def nll_loss(input, target, weight=None, ignore_index=-100, reduction="mean"):
    """Negative log-likelihood of class indices under log-probabilities ``input``, as
    ``torch.nn.functional.nll_loss``: ``-weight[y] * input[n, y]`` per position.

    Shapes, ``weight``, ``ignore_index`` and the weighted 'mean' are as in
    ``cross_entropy``; ``cross_entropy(x, y) == nll_loss(log_softmax(x, 1), y)``.
    """
    op = "nll_loss"
    check_reduction(op, reduction)
    x, t, w, _ = _prepare(op, input, target, weight, ignore_index, allow_probs=False)
    if x.ndim == 1:
        xb, tb = _batched(input, target, False)
        loss = nll_loss(xb, tb, w, ignore_index, reduction)
        return reshape(loss, ()) if reduction == "none" else loss
    q = _ClassTarget(t, x.shape, x.dtype, w, ignore_index, 0.0)
    return NLLLoss(q, reduction)(input)
