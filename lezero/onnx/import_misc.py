"""Smaller ONNX operators run with LeZero: BitCast, AffineGrid, Upsample (the deprecated
Resize), MaxUnpool, MelWeightMatrix and Binarizer (ai.onnx.ml); registered into
``import_ops.IMPORT_OPS``.

AffineGrid, Upsample and MaxUnpool go through ``lezero.functions`` so gradients reach
theta / the input; BitCast, MelWeightMatrix and Binarizer produce constants (a bit
pattern, a filter bank, a step function: nothing to differentiate).
"""
import types

import numpy as np

import lezero.functions as F
from lezero.core import Variable
from lezero.onnx.import_loss import _as_var
from lezero.onnx.import_ops import arr, as_dtype, ints, is_var, op, scalar
from lezero.onnx.import_resize import _resize


def _constant(like, value):
    """``value`` as a constant Variable when ``like`` is a Variable, else as it is."""
    return Variable(value, requires_grad=False) if is_var(like) else value


def _onnx_dtype(op_name, code):
    """The NumPy dtype of ONNX element type ``code``; one NumPy lacks is an error."""
    from lezero.onnx._deps import onnx
    tp = onnx().TensorProto
    if code in (tp.STRING, tp.UNDEFINED) or code not in tp.DataType.values():
        raise ValueError(f"{op_name}: element type {code} is not supported")
    dtype = np.dtype(onnx().helper.tensor_dtype_to_np_dtype(code))
    if dtype.kind not in "biuf":
        raise ValueError(f"{op_name}: element type {tp.DataType.Name(code)} has no NumPy "
                         "dtype LeZero computes with")
    return dtype


@op("BitCast")
def _bitcast(node, args, module):
    """The same bits read as another type of the same width (no gradient)."""
    x = arr(args[0])
    if x.dtype.kind not in "biuf":
        raise ValueError(f"BitCast: input dtype {x.dtype} is not supported")
    target = _onnx_dtype("BitCast", node.attrs.get("to", 0))
    if target.itemsize != x.dtype.itemsize:
        raise ValueError(f"BitCast: input {x.dtype} ({x.dtype.itemsize * 8} bits) and "
                         f"target {target} ({target.itemsize * 8} bits) differ in width")
    return _constant(args[0], np.array(x, order="C").view(target))


# ----- AffineGrid ----------------------------------------------------------------------

def _axis_points(n, align_corners):
    """Normalised coordinates of n pixels in [-1, 1] (pixel centres unless aligned)."""
    if align_corners:
        return np.linspace(-1.0, 1.0, n) if n > 1 else np.full(1, -1.0)
    return (2.0 * np.arange(n) + 1.0) / n - 1.0


def _base_grid(sizes, align_corners):
    """Homogeneous coordinates (x, y[, z], 1) of every output pixel: (prod(sizes), k+1),
    x running along the last axis."""
    axes = [_axis_points(n, align_corners) for n in sizes]
    mesh = np.meshgrid(*axes, indexing="ij")
    coords = [m.reshape(-1) for m in reversed(mesh)]
    return np.stack(coords + [np.ones(int(np.prod(sizes)))], axis=1)


@op("AffineGrid")
def _affine_grid(node, args, module):
    """theta (N, 2, 3) or (N, 3, 4) and size (N, C, H, W) or (N, C, D, H, W) -> the
    sampling grid (N, H, W, 2) or (N, D, H, W, 3) that GridSample reads."""
    theta, size = _as_var(args[0]), ints(args[1])
    k = len(size) - 2
    if k not in (2, 3) or theta.shape != (size[0], k, k + 1):
        raise ValueError(f"AffineGrid: theta of shape {theta.shape} and size {size} do not "
                         "make a 2-D (N, 2, 3) or 3-D (N, 3, 4) transform")
    if theta.dtype.kind != "f":
        raise ValueError(f"AffineGrid: theta must be a float tensor, got {theta.dtype}")
    base = _base_grid(size[2:], node.attrs.get("align_corners", 0)).astype(theta.dtype)
    grid = F.matmul(theta, base.T)                         # (N, k, pixels)
    return F.reshape(F.transpose(grid, (0, 2, 1)), (size[0], *size[2:], k))


# ----- Upsample ------------------------------------------------------------------------

@op("Upsample")
def _upsample(node, args, module):
    """Opset 7-9 Upsample is opset-10 Resize (asymmetric coordinates, floor rounding)
    with the scales as an attribute (opset 7) or an input (opset 9)."""
    mode = node.attrs.get("mode", "nearest")
    if mode not in ("nearest", "linear"):
        raise ValueError(f"Upsample: mode {mode!r} is not nearest or linear")
    scales = args[1] if len(args) > 1 and args[1] is not None else node.attrs.get("scales")
    if scales is None:
        raise ValueError("Upsample: no scales (neither an input nor an attribute)")
    scales = np.asarray(arr(scales), np.float32).reshape(-1)
    if len(scales) != arr(args[0]).ndim or (scales < 1).any():
        raise ValueError(f"Upsample: scales {scales.tolist()} must give one value >= 1 per "
                         f"dim of the rank-{arr(args[0]).ndim} input")
    resize = types.SimpleNamespace(op="Resize", attrs={"mode": mode})
    return _resize(resize, [args[0], scales], types.SimpleNamespace(opset=10))


# ----- MaxUnpool -----------------------------------------------------------------------

def _unpool_shape(node, shape):
    """The spatial shape MaxUnpool infers from kernel_shape, strides and pads."""
    kernel = node.attrs.get("kernel_shape")
    if not kernel or len(kernel) != len(shape) - 2:
        raise ValueError(f"MaxUnpool: kernel_shape {kernel} does not match the "
                         f"{len(shape) - 2} spatial dims of input {tuple(shape)}")
    strides = node.attrs.get("strides") or [1] * len(kernel)
    pads = node.attrs.get("pads") or [0] * (2 * len(kernel))
    n = len(kernel)
    return [(shape[2 + d] - 1) * strides[d] - pads[d] - pads[n + d] + kernel[d]
            for d in range(n)]


@op("MaxUnpool")
def _max_unpool(node, args, module):
    """Every input value goes to its flat index of the inferred output (N, C, *spatial);
    with ``output_shape`` that result is zero-padded (or cut) to it, top-left aligned,
    as ONNX's reference and test cases define it."""
    x, indices = _as_var(args[0]), np.asarray(arr(args[1])).astype(np.int64)
    if indices.shape != x.shape:
        raise ValueError(f"MaxUnpool: indices {indices.shape} and input {x.shape} differ")
    inferred = tuple(x.shape[:2]) + tuple(_unpool_shape(node, x.shape))
    total = int(np.prod(inferred))
    flat_idx = indices.reshape(-1)
    if flat_idx.size and ((flat_idx < 0) | (flat_idx >= total)).any():
        raise IndexError(f"MaxUnpool: an index lies outside the output of {total} values")
    source = np.full(total, -1, np.int64)
    source[flat_idx] = np.arange(flat_idx.size)
    picked = F.take(F.reshape(x, (-1,)), np.maximum(source, 0), axis=0)
    zero = np.zeros((), x.dtype)
    y = F.reshape(F.where(source >= 0, picked, zero), inferred)
    out_shape = ints(args[2]) if len(args) > 2 and args[2] is not None else inferred
    if len(out_shape) != len(inferred):
        raise ValueError(f"MaxUnpool: output_shape {out_shape} has the wrong rank")
    widths = [(0, max(o - i, 0)) for o, i in zip(out_shape, inferred)]
    y = F.pad(y, widths) if any(w for _, w in widths) else y
    return F.get_item(y, tuple(slice(0, o) for o in out_shape))


# ----- MelWeightMatrix and Binarizer ---------------------------------------------------

def _mel_edges(bins, dft_length, rate, low, high):
    """FFT-bin indices of the num_mel_bins + 2 triangle edges, spaced evenly in mel."""
    low_mel = 2595.0 * np.log1p(low / 700.0) / np.log(10.0)
    high_mel = 2595.0 * np.log1p(high / 700.0) / np.log(10.0)
    mels = np.arange(bins + 2) * ((high_mel - low_mel) / (bins + 2)) + low_mel
    hertz = 700.0 * np.expm1(mels / 2595.0 * np.log(10.0))
    return (((dft_length + 1) * hertz) // rate).astype(np.int64)


@op("MelWeightMatrix")
def _mel_weight_matrix(node, args, module):
    """The (dft_length // 2 + 1, num_mel_bins) triangular filter bank ONNX defines."""
    bins, dft_length, rate = (int(scalar(a)) for a in args[:3])
    low, high = (float(scalar(a)) for a in args[3:5])
    if bins <= 0 or dft_length <= 0 or rate <= 0 or not 0 <= low < high:
        raise ValueError(f"MelWeightMatrix: needs positive num_mel_bins ({bins}), "
                         f"dft_length ({dft_length}), sample_rate ({rate}) and "
                         f"0 <= lower ({low}) < upper edge ({high})")
    edges = _mel_edges(bins, dft_length, rate, low, high)
    n_freq = dft_length // 2 + 1
    if edges[-1] >= n_freq:
        raise ValueError(f"MelWeightMatrix: upper_edge_hertz {high} lies above the "
                         f"Nyquist bin for sample_rate {rate}")
    out = np.zeros((n_freq, bins))
    for i, (left, centre, right) in enumerate(zip(edges, edges[1:], edges[2:])):
        if centre == left:
            out[centre, i] = 1.0
        else:
            j = np.arange(left, centre + 1)
            out[j, i] = (j - left) / (centre - left)
        if right > centre:
            j = np.arange(centre, right)
            out[j, i] = (right - j) / (right - centre)
    return out.astype(_onnx_dtype("MelWeightMatrix", node.attrs.get("output_datatype", 1)))


@op("Binarizer")
def _binarizer(node, args, module):
    """ai.onnx.ml Binarizer: 1 where x > threshold, else 0, in x's dtype (no gradient)."""
    x = arr(args[0])
    if x.dtype.kind not in "iuf":
        raise ValueError(f"Binarizer: input dtype {x.dtype} is not supported")
    out = (x > node.attrs.get("threshold", 0.0)).astype(x.dtype)
    return _constant(args[0], out)
