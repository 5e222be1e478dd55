"""Layer, group and RMS normalization, with ``torch.nn.functional``'s arguments: each is
the fused ``Normalize`` (statistics computed once, backward from the saved statistics,
double differentiable); layer and RMS norm over the trailing dims run a Numba kernel in
float32.
"""
import numpy as np

from lezero.functions.normalization.checks import (check_input, check_normalized_shape,
                                                   check_param, param_inputs)
from lezero.functions.normalization.fused import Normalize
from lezero.functions.registry import register
from lezero.utils.checks import check_int, check_number

__all__ = ["layer_norm", "group_norm", "rms_norm"]


@register("normalization", kernels=("numpy", "cupy", "numba"), notes="fused")
def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Layer normalization over the trailing ``normalized_shape`` dims, as
    ``torch.nn.functional.layer_norm``; ``weight``/``bias`` have ``normalized_shape``."""
    op = "layer_norm"
    x = check_input(op, input, 1, "at least 1-D")
    shape = check_normalized_shape(op, normalized_shape, x)
    check_param(op, "weight", weight, shape, x)
    check_param(op, "bias", bias, shape, x)
    eps = check_number(op, "eps", eps, 0.0)
    params, flags = param_inputs(weight, bias)
    axes = tuple(range(x.ndim - len(shape), x.ndim))
    f = Normalize(axes, eps, param_shape=shape, trailing=True, **flags)
    return f(input, *params)


@register("normalization", notes="fused")
def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """Group normalization, as ``torch.nn.functional.group_norm``: the C channels of
    (N, C, ...) are split into ``num_groups`` groups, each normalised over its channels and
    positions; ``weight``/``bias`` are (C,)."""
    op = "group_norm"
    x = check_input(op, input, 2, "(N, C, ...)")
    n, n_ch = x.shape[:2]
    check_int(op, "num_groups", num_groups)
    if num_groups <= 0 or n_ch % num_groups:
        raise ValueError(f"{op}: num_groups must be a positive divisor of the {n_ch} "
                         f"channels, got {num_groups}")
    check_param(op, "weight", weight, (n_ch,), x)
    check_param(op, "bias", bias, (n_ch,), x)
    eps = check_number(op, "eps", eps, 0.0)
    params, flags = param_inputs(weight, bias)
    view = (n, int(num_groups), x.size // max(n * num_groups, 1))
    param_shape = (1, n_ch) + (1,) * (x.ndim - 2)
    return Normalize((2,), eps, view=view, param_shape=param_shape, **flags)(input, *params)


@register("normalization", kernels=("numpy", "cupy", "numba"), notes="fused")
def rms_norm(input, normalized_shape, weight=None, eps=None):
    """Root-mean-square normalization, as ``torch.nn.functional.rms_norm``:
    ``x / sqrt(mean(x**2) + eps) * weight`` over the trailing ``normalized_shape`` dims;
    ``eps=None`` uses the machine epsilon of the input's dtype (as PyTorch)."""
    op = "rms_norm"
    x = check_input(op, input, 1, "at least 1-D")
    shape = check_normalized_shape(op, normalized_shape, x)
    check_param(op, "weight", weight, shape, x)
    eps = float(np.finfo(x.dtype).eps) if eps is None else check_number(op, "eps", eps, 0.0)
    params, flags = param_inputs(weight, None)
    axes = tuple(range(x.ndim - len(shape), x.ndim))
    return Normalize(axes, eps, param_shape=shape, center=False, trailing=True,
                     **flags)(input, *params)
