"""Batch and instance normalization, with ``torch.nn.functional``'s arguments.

Both are the fused ``Normalize`` over the statistics' axes.  As in PyTorch, in training
they update the running-mean and running-variance arrays they are given *in place*:
``new = (1 - momentum) * old + momentum * batch``, the variance term being the unbiased
batch variance, while the output is normalised with the biased one.  Without batch
statistics (evaluation) they are an affine map per channel.
"""
import numpy as np

from lezero.functions.common import as_variable, xp_of
from lezero.functions.normalization.checks import (check_input, check_momentum, check_param,
                                                   param_inputs, running_array)
from lezero.functions.normalization.fused import Normalize
from lezero.functions.registry import register
from lezero.functions.shape import reshape
from lezero.utils.checks import check_bool, check_number

__all__ = ["batch_norm", "instance_norm"]


def _update(running, batch, momentum):
    """running = (1 - momentum) * running + momentum * batch, in place."""
    running *= 1 - momentum
    running += (momentum * batch).astype(running.dtype, copy=False)


def _channel_args(op, x, running_mean, running_var, weight, bias, momentum, eps):
    """The checks batch_norm and instance_norm share; returns (running_mean array,
    running_var array, momentum, eps, the (1, C, 1, ...) parameter shape)."""
    n_ch = x.shape[1]
    rm = running_array(op, "running_mean", running_mean, n_ch)
    rv = running_array(op, "running_var", running_var, n_ch)
    check_param(op, "weight", weight, (n_ch,), x)
    check_param(op, "bias", bias, (n_ch,), x)
    momentum = check_momentum(op, momentum)
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
    params, flags = param_inputs(weight, bias)
    f = Normalize(axes, eps, param_shape=param_shape, zero_var_rstd=True, **flags)
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
    with np.errstate(divide="ignore"):      # a zero variance with eps=0: inf, as PyTorch
        inv = as_variable((1 / xp.sqrt(running_var + eps)).astype(x.dtype))
    scale = inv if weight is None else weight * inv
    shift = as_variable(-running_mean.astype(x.dtype)) * scale
    if bias is not None:
        shift = shift + bias
    return x * reshape(scale, param_shape) + reshape(shift, param_shape)


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
    x = check_input(op, input, 2, "(N, C, ...)")
    training = check_bool(op, "training", training)
    rm, rv, momentum, eps, param_shape = _channel_args(op, x, running_mean, running_var,
                                                       weight, bias, momentum, eps)
    if not training:
        return _with_running_stats(op, "training=False", input, rm, rv, weight, bias, eps,
                                   param_shape)
    if eps <= 0:
        raise ValueError(f"{op}: eps must be positive when training (as in PyTorch), got "
                         f"{eps}")
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
    x = check_input(op, input, 3, "(N, C, *spatial) with at least one spatial axis")
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
