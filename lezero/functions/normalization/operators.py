"""Normalization operators, with ``torch.nn.functional``'s names, arguments and defaults.

batch_norm, layer_norm, group_norm, instance_norm and rms_norm are each one fused Function
(``normalization_core.Normalize``: statistics computed once, backward from the saved
statistics, double differentiable).  local_response_norm and normalize are compositions.

As in PyTorch, ``batch_norm`` and ``instance_norm`` in training update the running-mean
and running-variance arrays they are given *in place*: ``new = (1 - momentum) * old +
momentum * batch``, the variance term being the unbiased batch variance, while the output
is normalised with the biased one.
"""
import numpy as np

from lezero.core import Function
from lezero.functions.common import as_variable, xp_of
from lezero.functions.math import clip
from lezero.functions.normalization.normalize import Normalize
from lezero.functions.reduction import norm
from lezero.functions.registry import register
from lezero.functions.shape import reshape
from lezero.utils.checks import check_axis, check_bool, check_float_array, check_number

__all__ = ["batch_norm", "layer_norm", "group_norm", "instance_norm", "rms_norm",
           "local_response_norm", "normalize"]


# ----- argument checks -----------------------------------------------------------------

def _check_input(op, input, min_ndim, what):
    x = check_float_array(op, "input", input)
    if x.ndim < min_ndim:
        raise ValueError(f"{op}: input must be {what}, got shape {x.shape}")
    return x


def _check_param(op, name, value, shape, x):
    """weight/bias: None, or a float array of exactly ``shape`` and x's dtype."""
    if value is None:
        return
    p = check_float_array(op, name, value)
    if p.shape != tuple(shape):
        raise ValueError(f"{op}: {name} must have shape {tuple(shape)}, got {p.shape}")
    if p.dtype != x.dtype:
        raise TypeError(f"{op}: {name} has dtype {p.dtype} but input has dtype {x.dtype}")


def _running(op, name, value, n_channels):
    """A running statistic: None, or a float array (or Variable) of shape (C,); returns the
    array that will be updated in place."""
    if value is None:
        return None
    arr = check_float_array(op, name, value)
    if arr.shape != (n_channels,):
        raise ValueError(f"{op}: {name} must have shape ({n_channels},), got {arr.shape}")
    return arr


def _check_momentum(op, momentum):
    if momentum is None:
        raise TypeError(f"{op}: momentum=None (a cumulative average) needs a batch counter; "
                        "nn.BatchNorm keeps one. Pass a float momentum here")
    return check_number(op, "momentum", momentum, 0.0, 1.0)


def _normalized_shape(op, normalized_shape, x):
    """normalized_shape as a tuple of ints equal to x's trailing dims."""
    if isinstance(normalized_shape, (int, np.integer)):
        shape = (normalized_shape,)
    else:
        shape = tuple(normalized_shape) if isinstance(normalized_shape, (tuple, list)) else ()
    if not shape or any(isinstance(s, bool) or not isinstance(s, (int, np.integer))
                        for s in shape):
        raise TypeError(f"{op}: normalized_shape must be an int or a non-empty sequence of "
                        f"ints, got {normalized_shape!r}")
    shape = tuple(int(s) for s in shape)
    if x.shape[x.ndim - len(shape):] != shape or len(shape) > x.ndim:
        raise ValueError(f"{op}: normalized_shape {shape} must equal the input's trailing "
                         f"dims, got input shape {x.shape}")
    return shape


def _params(weight, bias):
    """The Normalize inputs after x, and its has_weight / has_bias flags."""
    params = [p for p in (weight, bias) if p is not None]
    return params, dict(has_weight=weight is not None, has_bias=bias is not None)


def _update(running, batch, momentum):
    """running = (1 - momentum) * running + momentum * batch, in place."""
    running *= 1 - momentum
    running += (momentum * batch).astype(running.dtype, copy=False)


def _channel_args(op, x, running_mean, running_var, weight, bias, momentum, eps):
    """The checks batch_norm and instance_norm share; returns (running_mean array,
    running_var array, momentum, eps, the (1, C, 1, ...) parameter shape)."""
    n_ch = x.shape[1]
    rm = _running(op, "running_mean", running_mean, n_ch)
    rv = _running(op, "running_var", running_var, n_ch)
    _check_param(op, "weight", weight, (n_ch,), x)
    _check_param(op, "bias", bias, (n_ch,), x)
    momentum = _check_momentum(op, momentum)
    eps = check_number(op, "eps", eps, 0.0)
    return rm, rv, momentum, eps, (1, n_ch) + (1,) * (x.ndim - 2)


def _with_running_stats(op, flag, input, running_mean, running_var, weight, bias, eps,
                        param_shape):
    """Normalise with the running statistics (which must be given, ``flag`` says when)."""
    if running_mean is None or running_var is None:
        raise ValueError(f"{op}: running_mean and running_var are required when {flag}")
    return _eval_affine(input, running_mean, running_var, weight, bias, eps, param_shape)


def _with_batch_stats(input, axes, eps, param_shape, weight, bias, running, momentum,
                      per_channel, count):
    """Normalise over ``axes`` with the input's own statistics; fold them into the running
    statistics ``running`` (mean, var; either may be None) in place, ``per_channel``
    turning a statistic into one value per channel (the variance made unbiased with
    ``count`` elements per statistic)."""
    params, flags = _params(weight, bias)
    f = Normalize(axes, eps, param_shape=param_shape, **flags)
    y = f(input, *params)
    rm, rv = running
    mean, var = f.batch_stats()
    if rm is not None:
        _update(rm, per_channel(mean), momentum)
    if rv is not None:
        _update(rv, per_channel(var) * (count / (count - 1)), momentum)
    return y


def _eval_affine(input, running_mean, running_var, weight, bias, eps, param_shape):
    """Normalise with fixed statistics: an affine map x * scale + shift per channel."""
    xp = xp_of(running_var)
    x = as_variable(input)
    inv = as_variable((1 / xp.sqrt(running_var + eps)).astype(x.dtype))
    scale = inv if weight is None else weight * inv
    shift = as_variable(-running_mean.astype(x.dtype)) * scale
    if bias is not None:
        shift = shift + bias
    return x * reshape(scale, param_shape) + reshape(shift, param_shape)


# ----- batch / instance norm -----------------------------------------------------------

@register("normalization", notes="fused; training updates running stats in place")
def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5):
    """Batch normalization over (N, C), (N, C, L), (N, C, H, W) ..., as
    ``torch.nn.functional.batch_norm``.

    Training: normalise each channel with the batch mean and biased variance, and update
    ``running_mean`` / ``running_var`` (when given) in place with ``momentum`` (the
    variance with the unbiased batch variance).  Otherwise normalise with the running
    statistics.  ``weight`` and ``bias`` are (C,).
    """
    op = "batch_norm"
    x = _check_input(op, input, 2, "(N, C, ...)")
    training = check_bool(op, "training", training)
    rm, rv, momentum, eps, param_shape = _channel_args(op, x, running_mean, running_var,
                                                       weight, bias, momentum, eps)
    if not training:
        return _with_running_stats(op, "training=False", input, rm, rv, weight, bias, eps,
                                   param_shape)
    n_ch = x.shape[1]
    count = x.size // max(n_ch, 1)
    if count <= 1:
        raise ValueError(f"{op}: expected more than 1 value per channel when training, got "
                         f"input shape {x.shape}")
    return _with_batch_stats(input, (0,) + tuple(range(2, x.ndim)), eps, param_shape, weight,
                             bias, (rm, rv), momentum, lambda s: s.reshape(n_ch), count)


@register("normalization", notes="fused; optional running stats updated in place")
def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,
                  use_input_stats=True, momentum=0.1, eps=1e-5):
    """Instance normalization of (N, C, *spatial), as ``torch.nn.functional.instance_norm``:
    each (sample, channel) is normalised over its spatial positions.

    With ``use_input_stats`` (default) the instance statistics are used and the running
    statistics, when given, are updated in place with their average over the batch;
    otherwise the running statistics normalise (as batch_norm in evaluation).
    """
    op = "instance_norm"
    x = _check_input(op, input, 3, "(N, C, *spatial) with at least one spatial axis")
    use_input_stats = check_bool(op, "use_input_stats", use_input_stats)
    rm, rv, momentum, eps, param_shape = _channel_args(op, x, running_mean, running_var,
                                                       weight, bias, momentum, eps)
    if not use_input_stats:
        return _with_running_stats(op, "use_input_stats=False", input, rm, rv, weight, bias,
                                   eps, param_shape)
    n, n_ch = x.shape[:2]
    count = int(np.prod(x.shape[2:]))
    if count <= 1:
        raise ValueError(f"{op}: expected more than 1 spatial element per channel, got "
                         f"input shape {x.shape}")
    return _with_batch_stats(input, tuple(range(2, x.ndim)), eps, param_shape, weight, bias,
                             (rm, rv), momentum, lambda s: s.reshape(n, n_ch).mean(axis=0),
                             count)


# ----- layer / group / RMS norm --------------------------------------------------------

@register("normalization", kernels=("numpy", "cupy", "numba"), notes="fused")
def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Layer normalization over the trailing ``normalized_shape`` dims, as
    ``torch.nn.functional.layer_norm``; ``weight``/``bias`` have ``normalized_shape``."""
    op = "layer_norm"
    x = _check_input(op, input, 1, "at least 1-D")
    shape = _normalized_shape(op, normalized_shape, x)
    _check_param(op, "weight", weight, shape, x)
    _check_param(op, "bias", bias, shape, x)
    eps = check_number(op, "eps", eps, 0.0)
    params, flags = _params(weight, bias)
    axes = tuple(range(x.ndim - len(shape), x.ndim))
    f = Normalize(axes, eps, param_shape=shape, trailing=True, **flags)
    return f(input, *params)


@register("normalization", notes="fused")
def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """Group normalization, as ``torch.nn.functional.group_norm``: the C channels of
    (N, C, ...) are split into ``num_groups`` groups, each normalised over its channels and
    positions; ``weight``/``bias`` are (C,)."""
    op = "group_norm"
    x = _check_input(op, input, 2, "(N, C, ...)")
    n, n_ch = x.shape[:2]
    if isinstance(num_groups, bool) or not isinstance(num_groups, (int, np.integer)):
        raise TypeError(f"{op}: num_groups must be an int, got {type(num_groups).__name__}")
    if num_groups <= 0 or n_ch % num_groups:
        raise ValueError(f"{op}: num_groups must be a positive divisor of the {n_ch} "
                         f"channels, got {num_groups}")
    _check_param(op, "weight", weight, (n_ch,), x)
    _check_param(op, "bias", bias, (n_ch,), x)
    eps = check_number(op, "eps", eps, 0.0)
    params, flags = _params(weight, bias)
    view = (n, int(num_groups), x.size // max(n * num_groups, 1))
    param_shape = (1, n_ch) + (1,) * (x.ndim - 2)
    return Normalize((2,), eps, view=view, param_shape=param_shape, **flags)(input, *params)


@register("normalization", kernels=("numpy", "cupy", "numba"), notes="fused")
def rms_norm(input, normalized_shape, weight=None, eps=None):
    """Root-mean-square normalization, as ``torch.nn.functional.rms_norm``:
    ``x / sqrt(mean(x**2) + eps) * weight`` over the trailing ``normalized_shape`` dims;
    ``eps=None`` uses the machine epsilon of the input's dtype (as PyTorch)."""
    op = "rms_norm"
    x = _check_input(op, input, 1, "at least 1-D")
    shape = _normalized_shape(op, normalized_shape, x)
    _check_param(op, "weight", weight, shape, x)
    eps = float(np.finfo(x.dtype).eps) if eps is None else check_number(op, "eps", eps, 0.0)
    params, flags = _params(weight, None)
    axes = tuple(range(x.ndim - len(shape), x.ndim))
    return Normalize(axes, eps, param_shape=shape, center=False, trailing=True,
                     **flags)(input, *params)


# ----- local response norm, normalize --------------------------------------------------

class ChannelWindowSum(Function):
    """out[:, c] = sum of x[:, c - before : c + after + 1] (zeros beyond the edges)."""

    def __init__(self, before, after):
        self.before = before
        self.after = after

    def forward(self, x):
        xp = xp_of(x)
        n_ch = x.shape[1]
        pad = [(0, 0)] * x.ndim
        pad[1] = (self.before + 1, self.after)      # +1: a zero in front of the cumsum
        cs = xp.cumsum(xp.pad(x, pad), axis=1)
        size = self.before + self.after + 1
        return cs[:, size:size + n_ch] - cs[:, :n_ch]

    def backward(self, gy):
        # The adjoint of a window sum is the window sum with the sides swapped.
        return ChannelWindowSum(self.after, self.before)(gy)


@register("normalization")
def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    """Local response normalization across channels, as
    ``torch.nn.functional.local_response_norm``:
    ``x / (k + alpha / size * sum of x**2 over size neighbouring channels) ** beta``."""
    op = "local_response_norm"
    _check_input(op, input, 3, "(N, C, *spatial) with at least 3 dims")
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)):
        raise TypeError(f"{op}: size must be an int, got {type(size).__name__}")
    if size < 1:
        raise ValueError(f"{op}: size must be positive, got {size}")
    alpha = check_number(op, "alpha", alpha)
    beta = check_number(op, "beta", beta)
    k = check_number(op, "k", k)
    x = as_variable(input)
    window = ChannelWindowSum(size // 2, (size - 1) // 2)(x * x)
    return x / (window * (alpha / size) + k) ** beta


@register("normalization")
def normalize(input, p=2.0, axis=1, eps=1e-12):
    """``input / max(||input||_p, eps)`` along ``axis``, as
    ``torch.nn.functional.normalize`` (with ``axis`` for PyTorch's ``dim``)."""
    op = "normalize"
    x = _check_input(op, input, 1, "at least 1-D")
    axis = check_axis(op, axis, x.ndim)
    p = check_number(op, "p", p, 0.0, low_open=True)
    eps = check_number(op, "eps", eps, 0.0)
    x = as_variable(input)
    return x / clip(norm(x, p, axis, keepdims=True), eps)

