"""Float products on MKL: one sequential MKL call per part, the parts on LeZero's threads.

``product(a, b)`` is what ``blas.matmul`` runs where float products run on MKL
(``mkl.used()``), ``stacked(a, b, out)`` what ``blas.matmul_nd`` runs for stacks of
matrices (the convolutions' per-group, per-tile or per-sample products).  A product below
``policy.small_flops`` is one call on this thread (MKL needs no guard to stay on one
thread, unlike OpenBLAS).  A larger one is cut into up to ``threads()`` parts of at
least ``policy.gemm_min_part_flops``: a stack by its matrices, one matrix by blocks of
its longer side (``blocks``: rows of ``a`` or columns of ``b``); each part writes its
block of the one output array, so nothing is copied or joined.  Inside a split kernel's
part (``serial_only()``) it is always one call.  A one-row product (a matrix-vector
product) stays on NumPy.  ``sgemm()`` is the C
function the kernels that multiply inside Numba code call.
"""
import itertools
import math

import numpy as np

from lezero.runtime import gemm_team, mkl, openblas
from lezero.runtime.blas import is_small
from lezero.runtime.scheduler import run_parts, split, threads_for
from lezero.runtime.settings import policy

__all__ = ["product", "stacked", "blocks", "sgemm", "native_threads"]

_LIMIT = 2 ** 31 - 1        # MKL's LP64 integers


def sgemm():
    """The ``cblas_sgemm`` that Numba kernels call (a ctypes function, taken as an
    argument): MKL's where float products run on it (``mkl.used()``), else NumPy's
    OpenBLAS's; None without either."""
    return mkl.library().cblas_sgemm if mkl.used() else openblas.sgemm()


def native_threads(flops=math.inf):
    """True when float products of ``flops`` each (a stack of them, or one) split over
    native threads by themselves, never waiting for Python's GIL: on ``gemm_team``'s
    workers where they run on MKL (``mkl.used()``; a stack by its matrices), on
    OpenBLAS's own threads where they run on NumPy and each is large enough for OpenBLAS
    to thread it (``policy.openblas_thread_flops``; NumPy loops over a stack's matrices).
    False where MKL runs them without the team (``policy.gemm_team = 0``): they split
    over LeZero's Python workers then (``run_parts``)."""
    if mkl.used():
        return gemm_team.available()
    return flops >= policy.openblas_thread_flops


def blocks(m, k, n):
    """``("rows" | "cols", [(start, stop), ...])``: how ``product`` cuts an (m, k) @ (k, n)
    product (one block: no split).  Every part reads the whole of the operand it does not
    cut, from the shared cache: row blocks each read all of ``b`` (k * n), column blocks
    all of ``a`` (m * k).  So the product is cut along its longer side -- columns when
    ``n > m`` (a transformer's ``x @ W.T``), rows when ``m >= n`` (a convolution's ``W @
    columns`` on a small map) -- given at least ``policy.gemm_min_part_rows`` rows or
    columns per part (measurements: docs/performance.md, "The second core")."""
    if is_small(m, k, n):
        return "rows", [(0, m)]
    least = 2 * policy.gemm_min_part_rows
    by_rows = m >= least and (m >= n or n < least)
    parts = threads_for(m if by_rows else n, 2.0 * m * k * n, policy.gemm_min_part_flops)
    return ("rows" if by_rows else "cols"), split(m if by_rows else n, parts)


def _into(a, b, out):
    """``out[...] = a @ b`` for one matrix, split as ``blocks`` says."""
    how, ranges = blocks(a.shape[0], a.shape[1], b.shape[1])
    if len(ranges) == 1:
        mkl.gemm(a, b, out)
    elif _on_team(how == "rows", ranges, a, b, out):
        pass
    elif how == "rows":
        run_parts(lambda i: _block(a[slice(*ranges[i])], b, out[slice(*ranges[i])]),
                  len(ranges))
    else:
        run_parts(lambda i: _block(a, b[:, slice(*ranges[i])], out[:, slice(*ranges[i])]),
                  len(ranges))
    return out


def _out_rows(out, m, k, n, ta, tb):
    """The row length (ldc) of ``out``'s matrices for MKL, or None where it reads them
    wrong (no whole-item row stride, rows overlapping) or past its 32-bit sizes."""
    row = out.strides[-2]
    ldc = row // out.itemsize
    if row % out.itemsize or ldc < n or max(m, k, n, ta[1], tb[1], ldc) > _LIMIT:
        return None
    return ldc


def _serial_stack(a, b, out, lead, ta, tb, ldc):
    """Every matrix of the stack on this thread, one MKL call each, found by its byte
    offset from the first (the operands' layout, ``ta``/``tb`` from ``mkl.operand``, is
    the same for all of them)."""
    (m, k), n = a.shape[-2:], b.shape[-1]
    if m == 0 or n == 0 or k == 0:
        out[...] = 0
        return out
    pa, pb, pc = mkl.address(a), mkl.address(b), mkl.address(out)
    sa, sb, sc = _lead_strides(a, lead), _lead_strides(b, lead), out.strides[:-2]
    for index in itertools.product(*map(range, lead)):
        mkl.gemm_at(a.dtype, ta, tb, m, n, k,
                    pa + sum(i * s for i, s in zip(index, sa)),
                    pb + sum(i * s for i, s in zip(index, sb)),
                    pc + sum(i * s for i, s in zip(index, sc)), ldc)
    return out


def _stack_on_team(a, b, out, lead, ta, tb, ldc, parts):
    """The stack in ``parts`` ranges of matrices on ``gemm_team`` when its matrices lie
    evenly spaced in each operand (one leading axis once those of size one are dropped);
    False when they do not or the team does not take them."""
    (m, k), n = a.shape[-2:], b.shape[-1]
    if m == 0 or n == 0 or k == 0:
        return False
    strides = []
    for own in (_lead_strides(a, lead), _lead_strides(b, lead), out.strides[:-2]):
        kept = [(size, step) for size, step in zip(lead, own) if size != 1]
        if any(step != inner_step * inner_size for (_, step), (inner_size, inner_step)
               in zip(kept, kept[1:])):
            return False                # not one even spacing
        strides.append(kept[-1][1] if kept else 0)
    count = math.prod(lead)
    addresses = (mkl.address(a), mkl.address(b), mkl.address(out))
    return gemm_team.run_stack(a.dtype, ta, tb, (m, n, k), addresses, strides, ldc,
                               split(count, parts))


def _lead_strides(x, lead):
    """``x``'s byte strides over the broadcast leading axes ``lead`` (0 where it repeats)."""
    own = x.shape[:-2]
    return (0,) * (len(lead) - len(own)) + tuple(
        0 if size == 1 else stride for size, stride in zip(own, x.strides[:-2]))


def _on_team(by_rows, ranges, a, b, out):
    """The blocks on ``gemm_team``'s native workers, after the checks MKL relies on;
    False when the team does not take them."""
    ta, tb = mkl.operand(a, "a"), mkl.operand(b, "b")
    if ta is None or tb is None or a.dtype != b.dtype or out.dtype != a.dtype \
            or a.dtype not in (np.float32, np.float64) or out.strides[1] != out.itemsize \
            or out.shape != (a.shape[0], b.shape[1]) or a.shape[1] != b.shape[0] \
            or _out_rows(out, *a.shape, b.shape[1], ta, tb) is None:
        return False
    return gemm_team.run(by_rows, ranges, a, ta, b, tb, out)


def _block(a, b, out):
    """One part's product; returns None, so no view of ``out`` waits in a Join."""
    mkl.gemm(a, b, out)


def product(a, b):
    """``a @ b`` for 2-D float32/float64 NumPy arrays of one dtype on MKL, or None when an
    operand has no unit stride or the shapes do not fit (the caller runs NumPy then)."""
    ta, tb = mkl.operand(a, "a"), mkl.operand(b, "b")
    (m, k), (k2, n) = a.shape, b.shape
    if ta is None or tb is None or k != k2 or max(m, k, n, ta[1], tb[1]) > _LIMIT:
        return None
    if m == 1:      # a matrix-vector product (a decoding step): NumPy's threaded gemv ran
        return None     # it in half the time of one MKL call
    out = np.empty((m, n), a.dtype)
    if is_small(m, k, n):               # one call on this thread, without re-checking
        return mkl.checked_gemm(a, ta, b, tb, out, max(n, 1))
    return _into(a, b, out)


def stacked(a, b, out=None):
    """``numpy.matmul(a, b, out=out)`` for float32/float64 arrays of two or more dims
    (leading axes broadcast) on MKL, or None where MKL cannot read them as they lie (no
    unit stride in a matrix, an ``out`` of another shape or dtype) or the matrices are
    too small to pay for a call each (``policy.stack_min_flops``): NumPy runs them then."""
    if a.ndim < 2 or b.ndim < 2 or a.shape[-1] != b.shape[-2]:
        return None
    la, lb = a.shape[:-2], b.shape[:-2]
    lead = la if la == lb else np.broadcast_shapes(la, lb)
    (m, k), n = a.shape[-2:], b.shape[-1]
    if out is None:
        out = np.empty(lead + (m, n), a.dtype)
    elif out.shape != lead + (m, n) or out.dtype != a.dtype:
        return None
    count = math.prod(lead)
    if count == 0:
        return out
    if b.ndim == 2 and a.flags.c_contiguous and out.flags.c_contiguous and count > 1:
        # a stack times one matrix (x @ W over batch axes): one product of the merged rows
        if mkl.operand(b, "b") is None:
            return None
        _into(a.reshape(-1, k), b, out.reshape(-1, n))
        return out
    a0, b0, o0 = a[(0,) * len(la)], b[(0,) * len(lb)], out[(0,) * len(lead)]
    ta, tb = mkl.operand(a0, "a"), mkl.operand(b0, "b")
    if ta is None or tb is None or o0.strides[-1] != out.itemsize:
        return None
    if count == 1:
        _into(a0, b0, o0)
        return out
    small = is_small(m, k, n)
    if small and 2.0 * m * k * n < policy.stack_min_flops:
        return None             # tiny matrices: NumPy's loop over them runs in C
    ldc = _out_rows(out, m, k, n, ta, tb)
    if ldc is None:
        return None
    parts = threads_for(count, 2.0 * count * m * k * n, policy.gemm_min_part_flops)
    if parts > 1 and _stack_on_team(a, b, out, lead, ta, tb, ldc, parts):
        return out
    if small or parts == 1:
        return _serial_stack(a, b, out, lead, ta, tb, ldc)
    A = np.broadcast_to(a, lead + (m, k))
    B = np.broadcast_to(b, lead + (k, n))
    index = list(np.ndindex(*lead))
    ranges = split(count, parts)

    def part(p):
        for i in index[slice(*ranges[p])]:
            _block(A[i], B[i], out[i])
    run_parts(part, parts)
    return out
