"""What every convolution algorithm shares: the interface, the cache between a forward and
its backward, scratch buffers and small window helpers.

An algorithm computes the three products of a convolution on raw arrays:

    forward(x, w)        -> y      the convolution
    grad_input(gy, w)    -> gx     its adjoint in x (the transposed convolution)
    grad_weight(x, gy)   -> gw     its adjoint in w

The autograd Functions in ``functions.py`` call these; the gradients of these products are
again these products, so one set of three serves any order of differentiation.

``cache`` is a dict that one convolution call shares between its forward and its
backward, so an algorithm can keep a transform it would otherwise recompute (Winograd keeps
the transformed input and filter, im2col its columns).  Entries are keyed by the array they
were computed from and are used only when that very array comes back (checked with
``is``).  What is kept for backward is kept inside the memory budget
(``lezero.runtime.budget``): an entry holds its ``Reservation`` and is dropped, with it,
once backward has used it (``drop_kept``).
"""
import weakref

import numpy as np

from lezero.backends import of_namespace
from lezero.runtime import budget


OPS = ("forward", "grad_input", "grad_weight")


class Algorithm:
    """Base class: subclasses set ``name`` and implement the three products."""

    name = ""
    summary = ""

    def unsupported(self, prob):
        """None when this algorithm handles the problem, else the reason why not."""
        return None

    def product_flops(self, prob):
        """The flops of each matrix product ``prob``'s work is made of (products split
        over the runtime's native threads by themselves: the batch split then waits for
        larger parts, ``parallel.parts_for``); 0 when its work is not mostly products."""
        return 0

    def sample_columns(self, prob):
        """The columns each sample adds to the one product of ``prob`` that the batch
        split would narrow (``parallel.parts_for``), or 0 when the split does not narrow
        a product (each part's products are as wide as the whole batch's)."""
        return 0

    def forward(self, x, w, prob, cache):
        raise NotImplementedError

    def grad_input(self, gy, w, prob, cache):
        raise NotImplementedError

    def grad_weight(self, x, gy, prob, cache):
        raise NotImplementedError

    def run(self, op, a, b, prob, cache):
        """Dispatch by op name (used by autotuning and ``conv_explain``)."""
        return getattr(self, op)(a, b, prob, cache)

    def shared(self, op, w, prob, cache):
        """What every batch part of ``op`` would compute from the weight ``w`` alike,
        computed once before the batch is split: {cache name: (key, value)}, put in each
        part's cache for the call (``functions.conv.parallel``).  Default: nothing."""
        return {}

    def workspace_bytes(self, prob, op):
        """Temporary memory the op needs besides its inputs and output."""
        return 0

    def predict(self, prob, op, reuse=False):
        """Predicted seconds for the op on one thread (the cost model).  ``reuse``: the
        same algorithm ran the forward pass, so what it cached there is free."""
        raise NotImplementedError


def cached(cache, name, key):
    """The value stored under ``name`` if it was computed from the array ``key``."""
    if cache is None:
        return None
    entry = cache.get(name)
    if entry is not None and entry[0] is key:
        return entry[1]
    return None


def store(cache, name, key, value, reservation=None):
    if cache is not None:
        cache[name] = (key, value, reservation)
    return value


def reserve_for_backward(cache, nbytes, need_keep_input=True):
    """A budget Reservation of ``nbytes`` for an array to keep for backward, or None:
    when the budget is full, or (``need_keep_input``) the weight wants no gradient."""
    if cache is None or (need_keep_input and not cache.get("keep_input")):
        return None
    return budget.reserve(nbytes)


def keep_within_budget(cache, name, key, value):
    """Store ``value`` for backward when the budget has room for it; return it."""
    reservation = reserve_for_backward(cache, value.nbytes, need_keep_input=False)
    if reservation is not None:
        store(cache, name, key, value, reservation)
    return value


def drop_kept(cache):
    """Forget the entries kept for backward (giving their bytes back to the budget)."""
    for key in [k for k, v in cache.items() if type(v) is tuple and len(v) == 3
                and v[2] is not None]:
        del cache[key]


# ----- weights that do not change -----------------------------------------------------------

_FIXED = {}         # id(array) -> (weak reference to it, {name: (transform, Reservation)})


def declare_fixed(w):
    """Declare that the array ``w`` will not change while it lives (inference fusion's
    folded weights: nobody else holds them): a transform of it made by
    ``fixed_transform`` is then kept from call to call until ``w`` is freed.  Host
    (NumPy) arrays only: a device array's transforms are made at each call."""
    if type(w) is not np.ndarray:
        return
    key = id(w)

    def forget(ref):
        if _FIXED.get(key, (None,))[0] is ref:
            del _FIXED[key]
    _FIXED[key] = (weakref.ref(w, forget), {})


def _kept_transforms(w):
    """The dict of transforms kept for ``w`` if it was declared fixed and lives, else None
    (an id of a freed array may have been reused)."""
    entry = _FIXED.get(id(w))
    return entry[1] if entry is not None and entry[0]() is w else None


def is_fixed(w):
    """Whether ``w`` was declared fixed (``declare_fixed``) and still lives."""
    return _kept_transforms(w) is not None


def fixed_transform(w, name, make):
    """``make()``, the transform ``name`` of ``w``: made once and kept where ``w`` was
    declared fixed (within the memory budget, ``lezero.runtime.budget``), else made
    anew at each call."""
    transforms = _kept_transforms(w)
    if transforms is None:
        return make()
    kept = transforms.get(name)
    if kept is None:
        value = make()
        reservation = budget.reserve(value.nbytes)
        if reservation is None:
            return value
        kept = transforms[name] = (value, reservation)
    return kept[0]


# ----- scratch buffers ------------------------------------------------------------------------
def output(cache, shape, dtype, xp, zeroed=False):
    """The array a forward or input-gradient product writes its result into: the rows of
    the one output that ``parallel.run_product`` gave this batch part (``cache["out"]``,
    when of this shape and dtype), else a new array.  Written in place, a part's result
    needs neither an array of its own nor a copy into the output after it (a depthwise
    layer (8, 32, 112, 112) went from 2.3 to 1.6 ms: docs/performance.md)."""
    dest = cache.pop("out", None) if cache is not None else None
    if dest is None or dest.shape != tuple(shape) or dest.dtype != dtype:
        return (xp.zeros if zeroed else xp.empty)(shape, dtype=dtype)
    if zeroed:
        dest[...] = 0
    return dest


def scratch(name, shape, dtype, xp=np):
    """An uninitialised array of ``shape``: on the host a view of the reusable buffer
    ``name`` (the numpy backend's ``scratch`` kernel, ``lezero.kernels.host``); on a
    device, from the device's own caching allocator."""
    return of_namespace(xp).kernel("scratch", _fresh)(name, shape, dtype, xp)


def _fresh(name, shape, dtype, xp):
    return xp.empty(shape, dtype=dtype)


# ----- small array helpers ----------------------------------------------------------------------

def copy_window(src, dst, offset):
    """Copy ``src`` into ``dst`` shifted by ``offset`` along the trailing spatial dims:
    ``dst[..., i + offset] = src[..., i]`` where both exist (the rest of ``dst`` is left
    as it is).  Pads when offsets are positive, crops when they are negative."""
    nd = len(offset)
    s_idx, d_idx = [], []
    for i in range(nd):
        n_src, n_dst = src.shape[-nd + i], dst.shape[-nd + i]
        lo = max(0, -offset[i])
        hi = min(n_src, n_dst - offset[i])
        if hi <= lo:
            return dst
        s_idx.append(slice(lo, hi))
        d_idx.append(slice(lo + offset[i], hi + offset[i]))
    dst[(Ellipsis,) + tuple(d_idx)] = src[(Ellipsis,) + tuple(s_idx)]
    return dst


def window_extent(geom):
    """Per dim, the span of the (padded) input that the output windows cover."""
    return tuple((o - 1) * s + d * (k - 1) + 1 for o, s, d, k
                 in zip(geom.out_size, geom.stride, geom.dilation, geom.kernel))


def padded_input(x, geom, xp):
    """``x`` placed into zeros of the window extent at ``pad_lo`` (pads or crops)."""
    ext = window_extent(geom)
    if ext == tuple(x.shape[2:]) and not any(geom.pad_lo):
        return x
    out = xp.zeros(x.shape[:2] + ext, dtype=x.dtype)
    return copy_window(x, out, geom.pad_lo)


def strided(geom, offsets=None):
    """Slices that pick the output grid (every stride-th point) out of a window extent,
    starting at ``offsets`` (the kernel position times the dilation)."""
    offsets = offsets or (0,) * geom.nd
    return tuple(slice(o, o + (n - 1) * s + 1, s)
                 for o, n, s in zip(offsets, geom.out_size, geom.stride))
