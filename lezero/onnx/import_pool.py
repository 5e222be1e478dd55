"""ONNX ``MaxPool`` and ``AveragePool`` run with LeZero, every attribute ONNX defines.

The common case (a float input, symmetric pads of at most half the kernel, no dilation
for averages) runs LeZero's pooling functions.  Everything else (pads beyond half a
kernel, asymmetric pads without padding in the count, dilated averages, integer inputs)
runs ``window_pool``: the pooled value is combined from one strided slice of the padded
input per kernel offset, so it stays differentiable through ``lezero.functions``.
Window rules follow ONNX: a window position past the padded input (``ceil_mode``) never
counts; padding counts in an average only with ``count_include_pad``.  MaxPool's
optional ``Indices`` output (flat positions in the input, row- or column-major by
``storage_order``) is computed with NumPy.
"""
import itertools

import numpy as np

import lezero.functions as F
from lezero import cuda
from lezero.onnx.import_ops import arr, is_var, op

__all__ = ["PoolGeometry", "auto_pads", "pool_geometry", "window_pool", "max_indices"]

_MAXPOOL = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}
_AVGPOOL = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}


class PoolGeometry:
    """Kernel, strides, dilations, (begin, end) pads and output size per spatial axis."""

    def __init__(self, kernel, strides, dilations, pads, sizes, ceil_mode):
        self.kernel, self.strides, self.dilations = kernel, strides, dilations
        self.pads, self.sizes, self.ceil_mode = pads, sizes, ceil_mode
        self.out = [self._out_size(*a) for a in zip(sizes, kernel, strides, dilations, pads)]

    def _out_size(self, n, k, s, d, pad):
        span = n + pad[0] + pad[1] - ((k - 1) * d + 1)
        if span < 0:
            raise ValueError(f"the kernel ({k}, dilation {d}) is larger than the padded input "
                             f"({n + pad[0] + pad[1]})")
        if not self.ceil_mode:
            return span // s + 1
        out = -(-span // s) + 1
        return out - 1 if (out - 1) * s >= n + pad[0] else out     # a window must start inside

    def needed(self, axis):
        """Padded length the windows reach along spatial ``axis``."""
        return (self.out[axis] - 1) * self.strides[axis] + \
            (self.kernel[axis] - 1) * self.dilations[axis] + 1

    def offsets(self):
        """Per kernel offset, the strided slices that pick it for every output position."""
        ranges = [range(k) for k in self.kernel]
        for offset in itertools.product(*ranges):
            yield tuple(slice(o * d, o * d + (m - 1) * s + 1, s) for o, d, m, s in
                        zip(offset, self.dilations, self.out, self.strides))


def auto_pads(node, sizes, kernel, strides, dilations):
    """(begin, end) padding per spatial axis, from ``pads`` or ``auto_pad`` (SAME_*: the
    output is ceil(size / stride), the odd pad at the end for UPPER, at the start for
    LOWER).  Also used by Conv."""
    mode = node.attrs.get("auto_pad", "NOTSET")
    n = len(kernel)
    if mode == "NOTSET":
        pads = list(node.attrs.get("pads", [0] * 2 * n))
        return list(zip(pads[:n], pads[n:]))
    if mode == "VALID":
        return [(0, 0)] * n
    out = []
    for size, k, s, d in zip(sizes, kernel, strides, dilations):
        total = max((-(-size // s) - 1) * s + (k - 1) * d + 1 - size, 0)
        lo = total // 2 if mode == "SAME_UPPER" else total - total // 2
        out.append((lo, total - lo))
    return out


def pool_geometry(node, shape):
    """The ``PoolGeometry`` of a pooling node over an input of ``shape`` (N, C, ...)."""
    kernel = list(node.attrs["kernel_shape"])
    n = len(kernel)
    if len(shape) != n + 2:
        raise ValueError(f"{node.op}: kernel_shape {kernel} needs a {n + 2}-D input, got "
                         f"shape {tuple(shape)}")
    strides = list(node.attrs.get("strides", [1] * n))
    dilations = list(node.attrs.get("dilations", [1] * n))
    sizes = list(shape[2:])
    pads = auto_pads(node, sizes, kernel, strides, dilations)
    return PoolGeometry(kernel, strides, dilations, pads, sizes,
                        bool(node.attrs.get("ceil_mode", 0)))


def _padded(x, geo, value):
    """``x`` padded by ``geo.pads`` (and at the end as far as the windows reach)."""
    widths = [(0, 0), (0, 0)]
    for axis, (n, (lo, hi)) in enumerate(zip(geo.sizes, geo.pads)):
        widths.append((lo, hi + max(geo.needed(axis) - (n + lo + hi), 0)))
    if is_var(x):
        return F.pad(x, widths, constant_values=value)
    return np.pad(arr(x), widths, constant_values=value)


def _lowest(dtype):
    return -np.inf if dtype.kind == "f" else np.iinfo(dtype).min


def _counts(geo, include_pad, dtype):
    """Per output position, how many window positions count in an average: the input's,
    and the padding's too with ``include_pad``; never those past the padded input."""
    if include_pad:
        mask = np.ones([n + lo + hi for n, (lo, hi) in zip(geo.sizes, geo.pads)], np.int64)
    else:
        mask = np.pad(np.ones(geo.sizes, dtype=np.int64), geo.pads)
    mask = np.pad(mask, [(0, max(geo.needed(a) - m, 0)) for a, m in enumerate(mask.shape)])
    total = sum(mask[index] for index in geo.offsets())
    return np.maximum(total, 1).astype(dtype)


def window_pool(x, geo, kind, include_pad=False):
    """``kind`` ('max', 'avg' or 'sum') pooling of ``x`` over ``geo`` by strided slices."""
    dtype = arr(x).dtype
    padded = _padded(x, geo, _lowest(dtype) if kind == "max" else 0)
    out = None
    for index in geo.offsets():
        part = padded[(slice(None), slice(None)) + index]
        if out is None:
            out = part
        elif kind == "max":
            out = F.maximum(out, part) if is_var(out) else np.maximum(out, part)
        else:
            out = out + part
    if kind in ("max", "sum"):
        return out
    counts = _counts(geo, include_pad, dtype)
    return out / cuda.get_array_module(arr(out)).asarray(counts)     # on x's device


def max_indices(data, geo, storage_order=0):
    """Flat input positions of MaxPool's maxima (the first one of ties), as ONNX's
    ``Indices``: over the whole (N, C, ...) input, spatial axes row-major or, with
    ``storage_order=1``, column-major."""
    plane = int(np.prod(geo.sizes))
    flat = np.arange(plane).reshape(geo.sizes)
    if storage_order:
        flat = np.arange(plane).reshape(geo.sizes[::-1]).T
    valid = np.pad(np.ones(geo.sizes, dtype=bool), geo.pads)
    positions = np.pad(flat, geo.pads, constant_values=-1)
    reach = [(0, max(geo.needed(a) - m, 0)) for a, m in enumerate(valid.shape)]
    valid, positions = np.pad(valid, reach), np.pad(positions, reach, constant_values=-1)
    values = np.pad(data, [(0, 0), (0, 0)] + [(lo, hi + r) for (lo, hi), (_, r) in
                                               zip(geo.pads, reach)])
    best = best_at = None
    for index in geo.offsets():
        v, ok = values[(slice(None), slice(None)) + index], valid[index]
        if best is None:
            best, best_at = v.copy(), np.broadcast_to(np.where(ok, positions[index], -1),
                                                      v.shape).copy()
            have = np.broadcast_to(ok, v.shape).copy()
            continue
        better = ok & (~have | (v > best))
        best, best_at = np.where(better, v, best), np.where(better, positions[index], best_at)
        have |= better
    base = np.arange(data.shape[0] * data.shape[1]).reshape(data.shape[:2]) * plane
    return (best_at + base.reshape(base.shape + (1,) * len(geo.sizes))).astype(np.int64)


def _fast(x, geo, dilated_ok):
    """Whether LeZero's pooling functions compute this pooling exactly."""
    return (arr(x).dtype.kind == "f" and (dilated_ok or set(geo.dilations) == {1})
            and all(lo == hi and 2 * lo <= k for (lo, hi), k in zip(geo.pads, geo.kernel)))


@op("MaxPool")
def _max_pool(node, args, module):
    x = args[0]
    geo = pool_geometry(node, arr(x).shape)
    if _fast(x, geo, dilated_ok=True):
        y = _MAXPOOL[len(geo.kernel)](x, tuple(geo.kernel), tuple(geo.strides),
                                      tuple(lo for lo, _ in geo.pads), tuple(geo.dilations),
                                      ceil_mode=geo.ceil_mode)
    else:
        y = window_pool(x, geo, "max")
    if len(node.outputs) > 1 and node.outputs[1]:
        order = node.attrs.get("storage_order", 0)
        return y, max_indices(cuda.as_numpy(arr(x)), geo, order)
    return y


@op("AveragePool")
def _avg_pool(node, args, module):
    x = args[0]
    geo = pool_geometry(node, arr(x).shape)
    include = bool(node.attrs.get("count_include_pad", 0))
    if not _fast(x, geo, dilated_ok=False):
        return window_pool(x, geo, "avg", include)
    return _AVGPOOL[len(geo.kernel)](x, tuple(geo.kernel), tuple(geo.strides),
                                     tuple(lo for lo, _ in geo.pads),
                                     ceil_mode=geo.ceil_mode, count_include_pad=include)


@op("LpPool")
def _lp_pool(node, args, module):
    """``(sum of |x| ** p over the window) ** (1 / p)``, padding counting as zeros."""
    x, p = args[0], node.attrs.get("p", 2)
    geo = pool_geometry(node, arr(x).shape)
    powered = F.abs(x) ** p if is_var(x) else np.abs(arr(x)) ** p
    total = window_pool(powered, geo, "sum")
    return total ** (1.0 / p)
