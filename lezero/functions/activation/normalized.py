"""softmax, log_softmax and gumbel_softmax (re-exported by ``activation``).

Both softmax forms subtract the maximum along ``axis`` before exponentiating, so inputs of
any magnitude give finite results.  Their backwards are written with LeZero operators on
the output, so they can be differentiated again.
"""
from lezero.core import Function
from lezero.random import get_rng
from lezero.functions.common import data_of, xp_of
from lezero.functions.math import exp
from lezero.functions.reduction import sum as _sum
from lezero.functions.registry import register
from lezero.utils.checks import check_axis, check_bool, check_float_array, check_real

__all__ = ["softmax", "log_softmax", "gumbel_softmax"]


def _shifted(x, axis):
    """x minus its maximum along ``axis``: every entry is <= 0, so exp() cannot overflow."""
    return x - x.max(axis=axis, keepdims=True)


class Softmax(Function):
    def __init__(self, axis):
        self.axis = axis

    def forward(self, x):
        e = xp_of(x).exp(_shifted(x, self.axis))
        return e / e.sum(axis=self.axis, keepdims=True)

    def backward(self, gy):
        # dy_i/dx_j = y_i (delta_ij - y_j)  =>  gx = y * (gy - sum(gy * y)).
        y = self.outputs[0]()
        return y * (gy - _sum(gy * y, axis=self.axis, keepdims=True))


class LogSoftmax(Function):
    def __init__(self, axis):
        self.axis = axis

    def forward(self, x):
        z = _shifted(x, self.axis)
        return z - xp_of(x).log(xp_of(x).exp(z).sum(axis=self.axis, keepdims=True))

    def backward(self, gy):
        # y = x - logsumexp(x)  =>  gx = gy - softmax(x) * sum(gy), softmax(x) = exp(y).
        y = self.outputs[0]()
        return gy - exp(y) * _sum(gy, axis=self.axis, keepdims=True)


def _axis(op, x, axis, name="input"):
    ndim = check_float_array(op, name, x).ndim
    if ndim == 0:
        raise ValueError(f"{op}: {name} must have at least 1 dim, got a 0-dim array")
    return check_axis(op, axis, ndim)


@register("activation")
def softmax(input, axis=-1):
    """exp(input) / sum(exp(input)) along ``axis`` (PyTorch's ``dim``), numerically stable."""
    return Softmax(_axis("softmax", input, axis))(input)


@register("activation")
def log_softmax(input, axis=-1):
    """input - logsumexp(input) along ``axis``, numerically stable."""
    return LogSoftmax(_axis("log_softmax", input, axis))(input)


class _StraightThrough(Function):
    """Forward gives a fixed array (the hard sample); backward passes the gradient
    through unchanged, as if the forward had been the identity."""

    def __init__(self, value):
        self.value = value

    def forward(self, x):
        return self.value

    def backward(self, gy):
        return gy


@register("activation")
def gumbel_softmax(logits, tau=1.0, hard=False, axis=-1):
    """A differentiable sample from the categorical distribution softmax(logits).

    Adds Gumbel(0, 1) noise (drawn from the process generator, so ``lz.manual_seed``
    reproduces it) and takes ``softmax((logits + noise) / tau)``.  With ``hard=True`` the
    value is the one-hot vector of the largest entry and the gradient is that of the soft
    sample (straight-through estimator), as in PyTorch.
    """
    ax = _axis("gumbel_softmax", logits, axis, "logits")
    tau = check_real("gumbel_softmax", "tau", tau)
    if not tau > 0:
        raise ValueError(f"gumbel_softmax: tau must be positive, got {tau}")
    hard = check_bool("gumbel_softmax", "hard", hard)
    x = data_of(logits)
    xp = xp_of(x)
    # -log(E) with E ~ Exponential(1) is Gumbel(0, 1) distributed.
    noise = -xp.log(get_rng(xp).standard_exponential(x.shape)).astype(x.dtype)
    y_soft = softmax((logits + noise) / tau, axis=ax)
    if not hard:
        return y_soft
    shape = [1] * x.ndim
    shape[ax] = x.shape[ax]
    positions = xp.arange(x.shape[ax]).reshape(shape)
    winner = xp.expand_dims(y_soft.data.argmax(axis=ax), ax)
    return _StraightThrough((positions == winner).astype(x.dtype))(y_soft)
