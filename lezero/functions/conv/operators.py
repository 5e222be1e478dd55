"""Convolution operators with ``torch.nn.functional``'s names, arguments and layouts.

    F.conv1d / conv2d / conv3d(x, weight, bias=None, stride=1, padding=0, dilation=1,
                               groups=1, algo="auto")
    F.conv_transpose1d / 2d / 3d(x, weight, bias=None, stride=1, padding=0,
                                 output_padding=0, groups=1, dilation=1)
    F.unfold(x, kernel_size, dilation=1, padding=0, stride=1)          # im2col
    F.fold(x, output_size, kernel_size, dilation=1, padding=0, stride=1)  # col2im
    F.conv_explain(x_shape, w_shape, ...)      # which algorithm, and why

Layouts are NCHW; a weight is ``(out, in / groups, *kernel)``, a transposed convolution's
weight ``(in, out / groups, *kernel)``.  ``padding`` takes an int, a tuple, ``"same"`` or
``"valid"``.  ``algo`` is one of "auto", "im2col", "winograd" (either tile size),
"winograd_2x2", "winograd_4x4", "fft", "direct", "depthwise"; see ``docs/convolution.md``.

Arguments are validated here, before any kernel runs; the work happens in
``lezero.functions.conv``.
"""
import sys

import numpy as np

from lezero.functions.common import mixed_precision, xp_of
from lezero.functions.conv import select
from lezero.functions.conv.explain import explain
from lezero.functions.conv.functions import (Conv, ConvGradInput, Fold, Unfold,
                                                   problem)
from lezero.functions.conv.geometry import ConvProblem, conv_geometry, conv_transpose_geometry
from lezero.functions.registry import register
from lezero.functions.shape import reshape
from lezero.utils.checks import check_float_array, check_int, ntuple

__all__ = ["conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
           "conv_transpose3d", "unfold", "fold", "conv_explain"]

_KERNELS = ("numpy", "numba", "cupy")
_SPATIAL = {1: "L", 2: "H, W", 3: "D, H, W"}


def _operands(op, nd, x, weight, bias):
    """Check kinds, ranks, dtypes and devices; return (x array, w array, batched x shape)."""
    xa = check_float_array(op, "x", x)
    wa = check_float_array(op, "weight", weight)
    if xa.ndim not in (nd + 1, nd + 2):
        raise ValueError(f"{op}: x must be {nd + 2}-D (N, C, {_SPATIAL[nd]}) or "
                         f"{nd + 1}-D unbatched, got shape {xa.shape}")
    if wa.ndim != nd + 2:
        raise ValueError(f"{op}: weight must be {nd + 2}-D, got shape {wa.shape}")
    if wa.dtype != xa.dtype and not mixed_precision(xa.dtype, wa.dtype):
        raise TypeError(f"{op}: x dtype {xa.dtype} and weight dtype {wa.dtype} differ")
    if xp_of(xa) is not xp_of(wa):
        raise TypeError(f"{op}: x and weight are on different devices")
    if bias is not None:
        ba = check_float_array(op, "bias", bias)
        if ba.dtype != xa.dtype and not mixed_precision(xa.dtype, ba.dtype):
            raise TypeError(f"{op}: bias dtype {ba.dtype} differs from x dtype {xa.dtype}")
        if xp_of(ba) is not xp_of(xa):
            raise TypeError(f"{op}: bias and x are on different devices")
    shape = xa.shape if xa.ndim == nd + 2 else (1,) + xa.shape
    return xa, wa, shape


def _check_bias(op, bias, channels):
    if bias is not None and check_float_array(op, "bias", bias).shape != (channels,):
        raise ValueError(f"{op}: bias must have shape ({channels},), got "
                         f"{check_float_array(op, 'bias', bias).shape}")


def _check_groups(op, groups, in_channels, out_channels):
    groups = check_int(op, "groups", groups, low=1)
    if in_channels % groups or out_channels % groups:
        raise ValueError(f"{op}: in_channels={in_channels} and out_channels={out_channels} "
                         f"must both be divisible by groups={groups}")


def _apply(fn, x, shape, args):
    """Run ``fn`` on a batched input (adding and removing the batch axis if needed)."""
    unbatched = tuple(shape) != tuple(x.shape)
    if unbatched:
        x = reshape(x, shape)
    y = fn(x, *args)
    return reshape(y, y.shape[1:]) if unbatched else y


def _conv(op, nd, x, weight, bias, stride, padding, dilation, groups, algo):
    xa, wa, shape = _operands(op, nd, x, weight, bias)
    cin, cout = shape[1], wa.shape[0]
    _check_groups(op, groups, cin, cout)
    if wa.shape[1] * groups != cin:
        raise ValueError(f"{op}: x has {cin} channels but weight of shape {wa.shape} "
                         f"expects {wa.shape[1] * groups} (weight.shape[1] * groups)")
    _check_bias(op, bias, cout)
    geom = conv_geometry(op, shape, wa.shape, nd, stride, padding, dilation, groups)
    select.check_algo(op, algo, problem(geom, shape[0], cin, cout, xa))
    args = (weight,) if bias is None else (weight, bias)
    return _apply(Conv(geom, algo), x, shape, args)


def _conv_transpose(op, nd, x, weight, bias, stride, padding, output_padding, groups, dilation):
    xa, wa, shape = _operands(op, nd, x, weight, bias)
    cin = shape[1]
    if wa.shape[0] != cin:
        raise ValueError(f"{op}: x has {cin} channels but weight of shape {wa.shape} "
                         f"expects {wa.shape[0]} (weight.shape[0])")
    _check_groups(op, groups, cin, wa.shape[1] * groups)
    cout = wa.shape[1] * groups
    _check_bias(op, bias, cout)
    geom = conv_transpose_geometry(op, shape, wa.shape, nd, stride, padding, output_padding,
                                   groups, dilation)
    args = (weight,) if bias is None else (weight, bias)
    return _apply(ConvGradInput(geom, "auto"), x, shape, args)


@register("conv", kernels=_KERNELS, notes="im2col/fft/direct")
def conv1d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1, algo="auto"):
    """1-D convolution (cross-correlation) of ``x (N, Cin, L)`` with ``weight
    (Cout, Cin / groups, k)``; see ``conv2d`` for the arguments."""
    return _conv("conv1d", 1, x, weight, bias, stride, padding, dilation, groups, algo)


@register("conv", kernels=_KERNELS, notes="im2col/winograd/fft/direct, algo='auto' picks")
def conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1, algo="auto"):
    """2-D convolution of ``x (N, Cin, H, W)`` with ``weight (Cout, Cin / groups, kh, kw)``.

    ``stride``, ``dilation``: int or pair.  ``padding``: int, pair, ``"valid"`` or ``"same"``
    (stride 1 only).  ``groups`` splits the channels (``groups == Cin`` is depthwise).
    ``algo``: "auto" (cost model, or measurement with ``Config.conv_autotune``), "im2col",
    "winograd", "winograd_2x2", "winograd_4x4", "fft", "direct" or "depthwise" (groups ==
    Cin).  Gradients flow to ``x``, ``weight`` and ``bias``, and can be differentiated
    again.
    """
    return _conv("conv2d", 2, x, weight, bias, stride, padding, dilation, groups, algo)


@register("conv", kernels=_KERNELS, notes="im2col/fft/direct")
def conv3d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1, algo="auto"):
    """3-D convolution of ``x (N, Cin, D, H, W)``; see ``conv2d`` for the arguments."""
    return _conv("conv3d", 3, x, weight, bias, stride, padding, dilation, groups, algo)


@register("conv", kernels=_KERNELS)
def conv_transpose1d(x, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """1-D transposed convolution; see ``conv_transpose2d``."""
    return _conv_transpose("conv_transpose1d", 1, x, weight, bias, stride, padding,
                           output_padding, groups, dilation)


@register("conv", kernels=_KERNELS)
def conv_transpose2d(x, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """2-D transposed convolution ("deconvolution"): the gradient of ``conv2d`` in its input.

    ``x (N, Cin, H, W)``, ``weight (Cin, Cout / groups, kh, kw)``; the output has
    ``(H - 1) * stride - 2 * padding + dilation * (kh - 1) + output_padding + 1`` rows.
    """
    return _conv_transpose("conv_transpose2d", 2, x, weight, bias, stride, padding,
                           output_padding, groups, dilation)


@register("conv", kernels=_KERNELS)
def conv_transpose3d(x, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """3-D transposed convolution; see ``conv_transpose2d``."""
    return _conv_transpose("conv_transpose3d", 3, x, weight, bias, stride, padding,
                           output_padding, groups, dilation)


def _block_geometry(op, spatial, kernel_size, dilation, padding, stride):
    """The geometry of sliding ``kernel_size`` blocks over an image of size ``spatial``."""
    kernel = ntuple(op, "kernel_size", kernel_size, 2, 1)
    if isinstance(padding, str):
        raise TypeError(f"{op}: padding must be an int or a pair of ints, got {padding!r}")
    pad = ntuple(op, "padding", padding, 2, 0)
    return conv_geometry(op, (1, 1) + tuple(spatial), (1, 1) + kernel, 2, stride, pad,
                         dilation, 1)


@register("conv", kernels=_KERNELS, notes="im2col")
def unfold(x, kernel_size, dilation=1, padding=0, stride=1):
    """Sliding blocks of ``x (N, C, H, W)`` as columns: ``(N, C * kh * kw, L)`` with rows
    ordered (channel, kernel row, kernel column), as ``torch.nn.functional.unfold``."""
    xa = check_float_array("unfold", "x", x)
    if xa.ndim not in (3, 4):
        raise ValueError(f"unfold: x must be 4-D (N, C, H, W) or 3-D unbatched, got "
                         f"shape {xa.shape}")
    shape = xa.shape if xa.ndim == 4 else (1,) + xa.shape
    geom = _block_geometry("unfold", shape[2:], kernel_size, dilation, padding, stride)
    return _apply(Unfold(geom), x, shape, ())


@register("conv", kernels=_KERNELS, notes="col2im")
def fold(x, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """The adjoint of ``unfold``: columns ``(N, C * kh * kw, L)`` summed back into an image
    ``(N, C, *output_size)``, overlapping blocks adding up."""
    xa = check_float_array("fold", "x", x)
    if xa.ndim not in (2, 3):
        raise ValueError(f"fold: x must be 3-D (N, C * kh * kw, L) or 2-D unbatched, "
                         f"got shape {xa.shape}")
    size = ntuple("fold", "output_size", output_size, 2, 1)
    geom = _block_geometry("fold", size, kernel_size, dilation, padding, stride)
    shape = xa.shape if xa.ndim == 3 else (1,) + xa.shape
    k = geom.kernel_volume
    if shape[1] % k:
        raise ValueError(f"fold: x dimension 1 ({shape[1]}) must be divisible by the "
                         f"product of kernel_size {geom.kernel} ({k})")
    if shape[2] != geom.out_volume:
        raise ValueError(f"fold: x has {shape[2]} blocks (dimension 2) but output_size="
                         f"{size} with kernel_size={geom.kernel} gives {geom.out_size} = "
                         f"{geom.out_volume} blocks")
    return _apply(Fold(geom, (shape[0], shape[1] // k) + size), x, shape, ())


def _explain_shape(arg, name):
    """``conv_explain``'s shape argument as a tuple of ints: an array (or Variable) stands for
    its shape, so that a user's arrays never end up printed whole in an error."""
    shape = getattr(arg, "shape", arg)
    try:
        shape = tuple(int(d) for d in shape)
    except (TypeError, ValueError):
        raise TypeError(f"conv_explain: {name} must be a shape (a tuple of ints) or an array, "
                        f"got {type(arg).__name__}") from None
    return shape


def conv_explain(x_shape, w_shape, stride=1, padding=0, dilation=1, groups=1,
                 dtype="float32", op="forward", backend="numpy", measure=True, repeat=3,
                 after=None, show=True, file=None):
    """Print and return how each convolution algorithm fares on one problem.

    ``x_shape`` and ``w_shape`` are shapes, or arrays standing for their shapes.
    For every algorithm: its predicted time (cost model), measured time (best of
    ``repeat``), workspace bytes, maximum error against a float64 reference (relative to
    the largest reference value), or why it cannot run; then which one ``algo="auto"``
    would choose and why.  ``op`` is "forward", "grad_input" or "grad_weight"; for a
    gradient, ``after`` names the algorithm of the forward pass, which is then timed with
    what that forward cached (as in training: Winograd reuses its transforms).  The table
    goes to ``file`` (default: standard output) unless ``show=False``.  Returns an
    ``Explanation`` (``.rows``, ``.chosen``, ``.reason``; ``str()`` gives the table).
    """
    x_shape, w_shape = _explain_shape(x_shape, "x_shape"), _explain_shape(w_shape, "w_shape")
    if len(x_shape) < 3 or len(w_shape) != len(x_shape):
        raise ValueError(f"conv_explain: x_shape {x_shape} and w_shape {w_shape} must both be "
                         "(N, C, *spatial) and (Cout, Cin / groups, *kernel)")
    if op not in ("forward", "grad_input", "grad_weight"):
        raise ValueError(f"conv_explain: op must be 'forward', 'grad_input' or 'grad_weight', "
                         f"got {op!r}")
    from lezero.backends import available
    if backend not in available():
        raise ValueError(f"conv_explain: backend must be one of {available()}, got {backend!r}")
    nd = len(x_shape) - 2
    _check_groups("conv_explain", groups, x_shape[1], w_shape[0])
    if w_shape[1] * groups != x_shape[1]:
        raise ValueError(f"conv_explain: x has {x_shape[1]} channels but w_shape {w_shape} "
                         f"expects {w_shape[1] * groups}")
    geom = conv_geometry("conv_explain", x_shape, w_shape, nd, stride, padding, dilation, groups)
    prob = ConvProblem(geom, x_shape[0], x_shape[1], w_shape[0], np.dtype(dtype).name, backend)
    if after is not None and after not in select.ALGORITHMS:
        raise ValueError(f"conv_explain: after must name an algorithm "
                         f"({', '.join(select.ALGORITHMS)}), got {after!r}")
    result = explain(prob, op, measure_time=measure, repeat=repeat, after=after)
    if show:
        print(result, file=file if file is not None else sys.stdout)
    return result
