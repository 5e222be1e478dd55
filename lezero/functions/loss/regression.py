"""Regression losses: mse_loss, l1_loss, smooth_l1_loss, huber_loss, poisson_nll_loss,
gaussian_nll_loss.

They are compositions of differentiable operators (plus ``SmoothL1``, one small piecewise
Function), so every one has a gradient for the input *and* the target, to any order.
``input`` and ``target`` must have one shape: PyTorch broadcasts them with a warning,
LeZero refuses (a mismatch is nearly always a bug, such as (N,) against (N, 1)).
"""
import math

from lezero.core import Function
from lezero.functions.common import as_variable, data_of, xp_of
from lezero.functions.loss.common import (check_floats, check_pair,
                                          check_same_shape, reduce_loss)
from lezero.functions.math import abs, exp, log
from lezero.functions.reduction import sum as _sum
from lezero.functions.registry import register
from lezero.functions.shape import reshape
from lezero.utils.checks import check_bool, check_float_array, check_number

__all__ = ["mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "poisson_nll_loss",
           "gaussian_nll_loss"]


def _check_weight(op, weight, input):
    if weight is None:
        return
    check_floats(op, input=input, weight=weight)
    check_same_shape(op, "input", input, "weight", weight)


def _weighted(loss, weight, reduction, mean="by_weight"):
    """Apply an elementwise ``weight``; PyTorch divides a weighted 'mean' by the summed
    weight for mse/l1 but by the element count for huber (``mean="by_count"``)."""
    if weight is None:
        return reduce_loss(loss, reduction)
    loss = loss * weight
    if reduction == "mean" and mean == "by_weight":
        return _sum(loss) / _sum(weight)
    return reduce_loss(loss, reduction)


@register("loss")
def mse_loss(input, target, reduction="mean", weight=None):
    """Mean squared error ``(input - target) ** 2``, as ``torch.nn.functional.mse_loss``.

    ``weight`` (the input's shape) scales each element; its 'mean' divides by
    ``sum(weight)``.
    """
    op = "mse_loss"
    input, target = check_pair(op, input, target, reduction)
    _check_weight(op, weight, input)
    d = input - target
    return _weighted(d * d, weight, reduction)


@register("loss")
def l1_loss(input, target, reduction="mean", weight=None):
    """Mean absolute error ``|input - target|``, as ``torch.nn.functional.l1_loss``
    (gradient 0 where input == target).  ``weight`` as in ``mse_loss``."""
    op = "l1_loss"
    input, target = check_pair(op, input, target, reduction)
    _check_weight(op, weight, input)
    return _weighted(abs(input - target), weight, reduction)


class SmoothL1(Function):
    """0.5 d^2 / beta where |d| < beta, |d| - 0.5 beta elsewhere (beta = 0: |d|)."""

    def __init__(self, beta):
        self.beta = beta

    def forward(self, d):
        xp = xp_of(d)
        a = xp.abs(d)
        self.inside = a < self.beta
        if not self.beta:
            return a
        return xp.where(self.inside, (0.5 / self.beta) * d * d, a - 0.5 * self.beta)

    def backward(self, gy):
        d = self.inputs[0]
        xp = xp_of(d.data)
        inside = self.inside.astype(d.dtype)
        # d/beta inside the quadratic zone, sign(d) outside: the slope is d * a + b with
        # constant a, b, so the second derivative (a) comes out right.
        a = inside / self.beta if self.beta else xp.zeros_like(inside)
        b = xp.sign(d.data) * (1 - inside)
        return gy * (d * as_variable(a) + as_variable(b))


@register("loss")
def smooth_l1_loss(input, target, reduction="mean", beta=1.0):
    """Smooth L1 loss, as ``torch.nn.functional.smooth_l1_loss``: quadratic for
    ``|input - target| < beta``, linear beyond; ``beta=0`` is ``l1_loss``."""
    op = "smooth_l1_loss"
    input, target = check_pair(op, input, target, reduction)
    beta = check_number(op, "beta", beta, 0.0)
    return reduce_loss(SmoothL1(beta)(input - target), reduction)


@register("loss")
def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    """Huber loss, as ``torch.nn.functional.huber_loss``: ``0.5 d^2`` for ``|d| < delta``,
    ``delta * (|d| - 0.5 delta)`` beyond; equals ``delta * smooth_l1_loss(beta=delta)``.
    With ``weight``, 'mean' divides by the element count (as PyTorch does)."""
    op = "huber_loss"
    input, target = check_pair(op, input, target, reduction)
    delta = check_number(op, "delta", delta, 0.0, low_open=True)
    _check_weight(op, weight, input)
    return _weighted(SmoothL1(delta)(input - target) * delta, weight, reduction,
                     mean="by_count")


@register("loss")
def poisson_nll_loss(input, target, log_input=True, full=False, eps=1e-8, reduction="mean"):
    """Poisson negative log-likelihood, as ``torch.nn.functional.poisson_nll_loss``.

    ``log_input=True``: ``exp(input) - target * input``; otherwise
    ``input - target * log(input + eps)``.  ``full`` adds the Stirling term
    ``target log(target) - target + 0.5 log(2 pi target)`` where ``target > 1``.
    """
    op = "poisson_nll_loss"
    input, target = check_pair(op, input, target, reduction)
    log_input = check_bool(op, "log_input", log_input)
    full = check_bool(op, "full", full)
    eps = check_number(op, "eps", eps, 0.0)
    if log_input:
        loss = exp(input) - target * input
    else:
        loss = input - target * log(input + eps)
    if full:
        t = data_of(target)
        big = as_variable((t > 1).astype(t.dtype))
        safe = target * big + (1 - big)        # 1 where the term is masked: log(1) = 0
        loss = loss + (safe * log(safe) - safe + 0.5 * log(safe * (2 * math.pi))) * big
    return reduce_loss(loss, reduction)


def _gaussian_var(op, var, input):
    """``var`` as an operand that broadcasts against ``input``, after PyTorch's checks."""
    x = data_of(input)
    if isinstance(var, (int, float)) and not isinstance(var, bool):
        if var < 0:
            raise ValueError(f"{op}: var has a negative value {var}")
        return as_variable(xp_of(x).full(x.shape, var, dtype=x.dtype))
    v = check_float_array(op, "var", var)
    if v.dtype != x.dtype:
        raise TypeError(f"{op}: var has dtype {v.dtype} but input has dtype {x.dtype}")
    if bool((v < 0).any()):
        raise ValueError(f"{op}: var has negative entries (min {float(v.min())})")
    if v.shape == x.shape:
        return var
    if v.shape == x.shape[:-1]:                 # one variance per row: add the last axis
        return reshape(var, v.shape + (1,))
    if v.ndim == x.ndim and sum(b for a, b in zip(x.shape, v.shape) if a != b) == 1:
        return var                              # one axis of size 1 that broadcasts
    raise ValueError(f"{op}: var of shape {v.shape} does not fit input of shape {x.shape} "
                     "(expected the input's shape, that shape without its last axis, or "
                     "it with one axis of size 1)")


@register("loss")
def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """Gaussian negative log-likelihood, as ``torch.nn.functional.gaussian_nll_loss``:
    ``0.5 * (log(var) + (input - target) ** 2 / var)`` (+ ``0.5 log(2 pi)`` if ``full``).

    ``var`` is clamped to at least ``eps`` for the value only: as in PyTorch the gradient
    flows to ``var`` as if unclamped.
    """
    op = "gaussian_nll_loss"
    input, target = check_pair(op, input, target, reduction)
    full = check_bool(op, "full", full)
    eps = check_number(op, "eps", eps, 0.0)
    var = _gaussian_var(op, var, input)
    v = data_of(var)
    var = var + as_variable(xp_of(v).maximum(v, v.dtype.type(eps)) - v)
    d = input - target
    loss = 0.5 * (log(var) + d * d / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return reduce_loss(loss, reduction)
