"""The argument checks the normalization operators share: the input's rank, weight and
bias shapes and dtypes, running statistics, momentum and ``normalized_shape``; and
``param_inputs``, the weight/bias inputs of the fused ``Normalize``."""
from lezero.functions.common import mixed_precision
from lezero.utils.checks import check_float_array, check_number, is_int


def check_input(op, input, min_ndim, what):
    x = check_float_array(op, "input", input)
    if x.ndim < min_ndim:
        raise ValueError(f"{op}: input must be {what}, got shape {x.shape}")
    return x


def check_param(op, name, value, shape, x):
    """weight/bias: None, or a float array of exactly ``shape`` and x's dtype."""
    if value is None:
        return
    p = check_float_array(op, name, value, shape=shape)
    if p.dtype != x.dtype and not mixed_precision(x.dtype, p.dtype):
        raise TypeError(f"{op}: {name} has dtype {p.dtype} but input has dtype {x.dtype}")


def running_array(op, name, value, n_channels):
    """A running statistic: None, or a float array (or Variable) of shape (C,); returns the
    array that will be updated in place."""
    if value is None:
        return None
    return check_float_array(op, name, value, shape=(n_channels,))


def check_momentum(op, momentum):
    if momentum is None:
        raise TypeError(f"{op}: momentum=None (a cumulative average) needs a batch counter; "
                        "nn.BatchNorm keeps one. Pass a float momentum here")
    return check_number(op, "momentum", momentum, 0.0, 1.0)


def check_normalized_shape(op, normalized_shape, x):
    """normalized_shape as a tuple of ints equal to x's trailing dims."""
    if is_int(normalized_shape):
        shape = (normalized_shape,)
    else:
        shape = tuple(normalized_shape) if isinstance(normalized_shape, (tuple, list)) else ()
    if not shape or not all(map(is_int, shape)):
        raise TypeError(f"{op}: normalized_shape must be an int or a non-empty sequence of "
                        f"ints, got {normalized_shape!r}")
    shape = tuple(int(s) for s in shape)
    if x.shape[x.ndim - len(shape):] != shape or len(shape) > x.ndim:
        raise ValueError(f"{op}: normalized_shape {shape} must equal the input's trailing "
                         f"dims, got input shape {x.shape}")
    return shape


def param_inputs(weight, bias):
    """The Normalize inputs after x, and its has_weight / has_bias flags."""
    params = [p for p in (weight, bias) if p is not None]
    return params, dict(has_weight=weight is not None, has_bias=bias is not None)
