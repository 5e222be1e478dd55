"""ONNX operators that exported models use beyond the core set: Mod, ScatterND, CastLike,
BitShift, RMSNormalization and LRN (registered into ``import_ops.IMPORT_OPS``).

As everywhere in the importer, plain arrays (indices, shapes, integer data) are computed
with NumPy and anything touching a Variable goes through ``lezero.functions``, so an
imported graph stays differentiable.
"""
import numpy as np

import lezero.functions as F
from lezero.onnx.import_loss import _as_var
from lezero.onnx.import_ops import arr, is_var, op


def _const_like(value, x):
    """``value`` as an array of ``x``'s float dtype (keeps float16/float64 graphs exact)."""
    return np.asarray(value, dtype=arr(x).dtype)


# ----- Mod -----------------------------------------------------------------------------

@op("Mod")
def _mod(node, args, module):
    """``fmod=0``: the remainder has the divisor's sign (Python's ``%``); ``fmod=1``: the
    dividend's (C's ``fmod``).  On Variables the value is exact and the gradient is that
    of ``a - q * b`` with the quotient ``q`` held constant."""
    a, b = args
    fmod = node.attrs.get("fmod", 0)
    if fmod not in (0, 1):
        raise ValueError(f"Mod: attribute fmod must be 0 or 1, got {fmod}")
    np_fn = np.fmod if fmod else np.mod
    exact = np_fn(arr(a), arr(b))
    if not (is_var(a) or is_var(b)):
        return exact
    if exact.dtype.kind != "f":
        raise ValueError(f"Mod on a Variable of dtype {exact.dtype} (integer Mod runs on "
                         "constant arrays only)")
    q = (arr(a) - exact) / arr(b)                # the integer quotient, as floats
    approx = a - b * q.astype(exact.dtype)
    return approx + (exact - arr(approx))        # exact value, gradient of a - q b


# ----- ScatterND -----------------------------------------------------------------------

_SCATTER_UFUNC = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def _scatter_rows(data_shape, indices):
    """Flat row numbers (into ``data`` reshaped to (rows, *tail)) of ONNX ScatterND
    ``indices`` (shape (..., k)); negative indices count from the end."""
    idx = np.asarray(indices).astype(np.int64)
    k = idx.shape[-1]
    if k > len(data_shape):
        raise ValueError(f"ScatterND: indices address {k} dims, data has "
                         f"{len(data_shape)}")
    lead = np.asarray(data_shape[:k], dtype=np.int64)
    idx = idx.reshape(-1, k)
    idx = np.where(idx < 0, idx + lead, idx)
    if ((idx < 0) | (idx >= lead)).any():
        raise IndexError(f"ScatterND: an index lies outside data's leading dims "
                         f"{tuple(data_shape[:k])}")
    rows = np.ravel_multi_index(idx.T, tuple(lead)) if k else np.zeros(len(idx), np.int64)
    return rows, int(np.prod(lead)), tuple(data_shape[k:])


def _rounds(rows, n_rows):
    """Split the updates into rounds in which every row is written at most once, in
    order: yields (mask over rows, source update per row)."""
    occurrence = np.zeros(len(rows), np.int64)
    seen = {}
    for m, r in enumerate(rows.tolist()):
        occurrence[m] = seen.get(r, 0)
        seen[r] = occurrence[m] + 1
    for k in range(int(occurrence.max()) + 1 if len(rows) else 0):
        sel = np.nonzero(occurrence == k)[0]
        mask, source = np.zeros(n_rows, bool), np.zeros(n_rows, np.int64)
        mask[rows[sel]], source[rows[sel]] = True, sel
        yield mask, source


def _combine(reduction, out, taken, mask):
    if reduction == "none":
        return F.where(mask, taken, out)
    if reduction == "add":
        return out + F.where(mask, taken, np.zeros((), arr(taken).dtype))
    if reduction == "mul":
        return out * F.where(mask, taken, np.ones((), arr(taken).dtype))
    pick = F.maximum if reduction == "max" else F.minimum
    return F.where(mask, pick(out, taken), out)


@op("ScatterND")
def _scatter_nd(node, args, module):
    data, indices, updates = args
    reduction = node.attrs.get("reduction", "none")
    if reduction not in ("none", "add", "mul", "max", "min"):
        raise ValueError(f"ScatterND: reduction {reduction!r} is not one of none, add, "
                         "mul, max, min")
    shape = arr(data).shape
    rows, n_rows, tail = _scatter_rows(shape, arr(indices))
    upd_shape = arr(updates).shape
    if upd_shape != arr(indices).shape[:-1] + tail:
        raise ValueError(f"ScatterND: updates have shape {upd_shape}, expected "
                         f"{arr(indices).shape[:-1] + tail}")
    if not (is_var(data) or is_var(updates)):
        out = np.array(arr(data)).reshape((n_rows,) + tail)
        upd = arr(updates).reshape((len(rows),) + tail)
        if reduction == "none":
            out[rows] = upd
        else:
            _SCATTER_UFUNC[reduction].at(out, rows, upd)
        return out.reshape(shape)
    out = F.reshape(data, (n_rows,) + tail) if is_var(data) else \
        arr(data).reshape((n_rows,) + tail)
    upd = F.reshape(updates, (len(rows),) + tail) if is_var(updates) else \
        arr(updates).reshape((len(rows),) + tail)
    take = F.take if is_var(upd) else np.take
    for mask, source in _rounds(rows, n_rows):
        mask = mask.reshape((n_rows,) + (1,) * len(tail))
        out = _combine(reduction, out, take(upd, source, axis=0), mask)
    return F.reshape(out, shape)


# ----- CastLike and BitShift -------------------------------------------------------------

_PLAIN_DTYPES = {np.dtype(t) for t in (np.bool_, np.int8, np.int16, np.int32, np.int64,
                                        np.uint8, np.uint16, np.uint32, np.uint64,
                                        np.float16, np.float32, np.float64)}


@op("CastLike")
def _cast_like(node, args, module):
    """``x`` with the dtype of the second input (differentiable between float dtypes)."""
    x, target = args[0], arr(args[1]).dtype
    if target not in _PLAIN_DTYPES:
        raise ValueError(f"CastLike to dtype {target} is not supported (booleans, integers, "
                         "float16/32/64)")
    if is_var(x) and x.dtype.kind == "f" and target.kind == "f":
        return x.to(dtype=target)
    return arr(x).astype(target)


@op("BitShift")
def _bit_shift(node, args, module):
    """Shifts of integers, wrapping within the type's width; a shift that is negative or at
    least that width gives 0 (-1 for a right shift of a negative signed value)."""
    x, y = np.broadcast_arrays(arr(args[0]), arr(args[1]))
    direction = node.attrs.get("direction")
    if direction not in ("LEFT", "RIGHT"):
        raise ValueError(f"BitShift: direction must be 'LEFT' or 'RIGHT', got {direction!r}")
    if x.dtype.kind not in "iu" or y.dtype.kind not in "iu":
        raise ValueError(f"BitShift: inputs must be integers, got {x.dtype} and {y.dtype}")
    x = np.ascontiguousarray(x)
    bad = (y < 0) | (y >= 8 * x.dtype.itemsize)
    unsigned = np.dtype(f"u{x.dtype.itemsize}")
    shift = np.where(bad, 0, y).astype(unsigned)
    if direction == "RIGHT":
        out = np.right_shift(x, shift.astype(x.dtype))
        fill = np.where(x < 0, -1, 0) if x.dtype.kind == "i" else 0
    else:
        out, fill = np.left_shift(x.view(unsigned), shift).view(x.dtype), 0
    return np.where(bad, fill, out).astype(x.dtype)


# ----- normalizations --------------------------------------------------------------------

@op("RMSNormalization")
def _rms_norm(node, args, module):
    """``x / sqrt(mean(x^2 over axis..last) + epsilon) * scale``, computed in float32 when
    ``stash_type`` is 1 (the default) and ``x`` is narrower."""
    x, scale = args[:2]
    data = arr(x)
    if data.dtype.kind != "f":
        raise ValueError(f"RMSNormalization: input must be floating point, got {data.dtype}")
    axis = node.attrs.get("axis", -1) % data.ndim
    eps = node.attrs.get("epsilon", 1e-5)
    stash = node.attrs.get("stash_type", 1)
    if stash not in (1, 11):
        raise ValueError(f"RMSNormalization: stash_type {stash} is not supported (1 or 11)")
    wide = np.dtype(np.float32 if stash == 1 else np.float64)
    x = _as_var(x)
    xs = x.to(dtype=wide) if data.dtype.itemsize < wide.itemsize else x
    axes = tuple(range(axis, data.ndim))
    ms = F.mean(xs * xs, axis=axes, keepdims=True)
    y = xs / F.sqrt(ms + _const_like(eps, xs))
    return y.to(dtype=data.dtype) * scale


@op("LRN")
def _lrn(node, args, module):
    """Local response normalization across channels: ``x / (bias + alpha / size *
    sum of x^2 over the channel window) ** beta``, the window spanning
    ``floor((size-1)/2)`` channels before and ``ceil((size-1)/2)`` after."""
    x = _as_var(args[0])
    a = node.attrs
    size = int(a["size"])
    if size < 1:
        raise ValueError(f"LRN: size must be positive, got {size}")
    if x.ndim < 3:
        raise ValueError(f"LRN: input must be (N, C, ...), got shape {x.shape}")
    alpha, beta, bias = a.get("alpha", 1e-4), a.get("beta", 0.75), a.get("bias", 1.0)
    before, after = (size - 1) // 2, size // 2
    sq = F.pad(x * x, [(0, 0), (before, after)] + [(0, 0)] * (x.ndim - 2),
               constant_values=0.0)
    channels = x.shape[1]
    total = sq[:, 0:channels]
    for k in range(1, size):
        total = total + sq[:, k:k + channels]
    denom = total * _const_like(alpha / size, x) + _const_like(bias, x)
    return x / denom ** _const_like(beta, x)


# the other new operator families register themselves on import
from lezero.onnx import import_quant  # noqa: E402,F401
from lezero.onnx import import_resize  # noqa: E402,F401
from lezero.onnx import import_attention  # noqa: E402,F401
from lezero.onnx import import_seq, import_misc  # noqa: E402,F401
from lezero.onnx import import_control  # noqa: E402,F401  (If, Loop, Scan)
from lezero.onnx import import_qlinear  # noqa: E402,F401  (QLinearMatMul, ConvInteger, ...)
