"""NumPy's BLAS threads: one threadpoolctl controller and one guard that holds them to one
thread.

* ``held_to_one_thread()``: BLAS on one thread inside a block -- the parts of a split
  kernel run under it, each on its own core.  It touches only the BLAS libraries, found
  once (5 us against threadpoolctl's ``limit`` at 25).
* ``one_blas_thread()``: the same, unless ``lz.Config.small_gemm_one_thread`` is off --
  for a block of small products (the steps of a recurrent layer).
* ``matmul(a, b)``: on Intel MKL where float products run on it (``mkl.used()``: the
  ``mkl`` wheel installed, an Intel CPU; ``lezero.runtime.gemm``); else a product below
  ``policy.small_flops`` runs on one thread.  OpenBLAS threads a GEMM once it passes a
  few hundred thousand multiply-adds; for a small one the fork and join cost more than
  they save, and on a busy machine the join waits for a helper thread that has no core.
  One thread may round differently (OpenBLAS can block the summed axis differently).

Without threadpoolctl, or for CuPy arrays, products run as they are.  Measurements behind
the thresholds: docs/performance.md.
"""
import contextlib
import math

import numpy as np

from lezero.core import get_config
from lezero.runtime.settings import policy

__all__ = ["controller", "held_to_one_thread", "one_blas_thread", "limit_all", "is_small",
           "matmul", "matmul_ref", "matmul_nd", "split_stack", "few_rows_product"]

_found = {}


def controller():
    """The one ``threadpoolctl.ThreadpoolController`` (None when threadpoolctl is missing
    or cannot inspect this process)."""
    if "all" not in _found:
        try:
            import threadpoolctl
            _found["all"] = threadpoolctl.ThreadpoolController()
        except Exception:
            _found["all"] = None
        libs = _found["all"].select(user_api="blas").lib_controllers if _found["all"] else []
        # MKL on its sequential layer (lezero.runtime.mkl) has no threads to hold
        _found["blas"] = [c for c in libs if getattr(c, "threading_layer", "") != "sequential"]
    return _found["all"]


def _blas_libs():
    controller()
    return _found["blas"]


def limit_all(n):
    """threadpoolctl's limit of every BLAS and OpenMP pool to ``n`` threads (a context
    object with ``restore_original_limits()``), or None without threadpoolctl."""
    c = controller()
    return c.limit(limits=n) if c is not None else None


@contextlib.contextmanager
def held_to_one_thread(enabled=True):
    """Hold NumPy's BLAS to one thread inside the block (when ``enabled``)."""
    libs = _blas_libs() if enabled else ()
    before = [c.get_num_threads() for c in libs]
    for c, n in zip(libs, before):
        if n != 1:
            c.set_num_threads(1)
    try:
        yield
    finally:
        for c, n in zip(libs, before):
            if n != 1:
                c.set_num_threads(n)


def one_blas_thread(enabled=True):
    """``held_to_one_thread`` when ``enabled`` and ``lz.Config.small_gemm_one_thread``."""
    return held_to_one_thread(enabled and get_config().small_gemm_one_thread)


def is_small(m, k, n):
    """True when an (m, k) @ (k, n) product is below ``policy.small_flops``."""
    return 2.0 * m * k * n < policy.small_flops


def matmul_ref(a, b):
    """The reference: NumPy's product as it is."""
    return a @ b


_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_gemm = []          # lezero.runtime.gemm, imported on first use (it imports this module)


def matmul(a, b):
    """``a @ b`` for 2-D arrays: on MKL where float products run on it (``mkl.used()``,
    ``lezero.runtime.gemm``), else NumPy's, on one BLAS thread when the product is small."""
    if type(a) is np.ndarray and type(b) is np.ndarray and a.ndim == 2 and b.ndim == 2:
        if a.dtype == b.dtype and a.dtype in _FLOATS:
            if _mkl_gemm() is not None:
                y = _mkl_gemm().product(a, b)
                if y is not None:
                    return y
        # A one-row product (a decoding step) reads its whole matrix for few flops: it is
        # bound by memory, which two cores draw faster than one; OpenBLAS threads it.
        if is_small(a.shape[0], a.shape[1], b.shape[1]) and a.shape[0] > 1 \
                and get_config().small_gemm_one_thread:
            with held_to_one_thread():
                return few_rows_product(a, b)
    return a @ b


def few_rows_product(a, b):
    """``a @ b`` for NumPy matrices; ``x @ W.T`` with a few rows of ``x`` (2 to
    ``policy.few_rows``: a classifier at batch 2, a decoding step of 4 sequences) as
    ``(W @ x.T).T``, copied to C order.  On one thread OpenBLAS's ``sgemm`` takes 2-3x
    as long for the first form; ``matmul`` uses it for the small products it holds to
    one thread only, since OpenBLAS threads the second form where it would not thread
    the first, and its threads then spin against the next kernel (docs/performance.md,
    "Small batches")."""
    if 1 < a.shape[0] <= policy.few_rows and b.flags.f_contiguous and not b.flags.c_contiguous:
        return np.ascontiguousarray(np.matmul(b.T, a.T).T)
    return a @ b


def _mkl_gemm():
    """``lezero.runtime.gemm`` while float products run on MKL (``mkl.used()``), else None."""
    if not _gemm:
        from lezero.runtime import gemm, mkl
        _gemm.extend((gemm, mkl))
    return _gemm[0] if _gemm[1].used() else None


def matmul_nd(xp, a, b, out=None):
    """``xp.matmul(a, b, out=out)`` for stacks of matrices (the convolutions' products): on
    MKL for float NumPy arrays where float products run on it (``mkl.used()``,
    ``lezero.runtime.gemm.stacked``), else ``xp``'s own -- for NumPy, the stack cut
    across threads where that pays (``split_stack``)."""
    if type(a) is np.ndarray and type(b) is np.ndarray and a.dtype == b.dtype \
            and a.dtype in _FLOATS and (out is None or type(out) is np.ndarray):
        if _mkl_gemm() is not None:
            y = _mkl_gemm().stacked(a, b, out)
            if y is not None:
                return y
        elif a.ndim >= 2 and b.ndim >= 2 and (a.ndim > 2 or b.ndim > 2):
            return split_stack(a, b, out)
    return xp.matmul(a, b, out=out)


def split_stack(a, b, out=None):
    """``np.matmul(a, b, out=out)`` with the stack's leading axis cut into one part per
    thread (``scheduler.run_parts``: each part's matrices on one BLAS thread) when the
    stack has the work for it (``policy.gemm_min_part_flops`` a part) and
    ``policy.split_stacks`` is on.  OpenBLAS threads each product of a stack by itself,
    a fork and a join per matrix: a convolution's stack of small products (Winograd's 16
    or 36 at batch 1) ran at half the rate of whole matrices per thread
    (docs/performance.md, "Small batches")."""
    from lezero.runtime.scheduler import run_parts, split, threads_for
    (m, k), n = a.shape[-2:], b.shape[-1]
    least = policy.gemm_min_part_flops
    # (the stack holds at most the product of the operands' matrix counts: a stack with
    # too little work for two parts is told apart before its shape is broadcast)
    if not policy.split_stacks or 2.0 * m * k * n * (a.size // max(m * k, 1)) \
            * (b.size // max(k * n, 1)) < 2 * least:
        return np.matmul(a, b, out=out)
    lead = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    count = lead[0] if lead else 1
    parts = threads_for(count, 2.0 * math.prod(lead) * m * k * n, least)
    # (an uneven cut of a few matrices, 2 + 1, would leave a thread idle a third of it)
    if parts < 2 or (count % parts and count < 4 * parts) or k != b.shape[-2] \
            or (out is not None and out.shape != lead + (m, n)):
        return np.matmul(a, b, out=out)         # (a wrong shape: NumPy's own error)
    if out is None:
        out = np.empty(lead + (m, n), a.dtype)
    cut_a = a.ndim == out.ndim and a.shape[0] == count
    cut_b = b.ndim == out.ndim and b.shape[0] == count
    bounds = split(count, parts)

    def part(i):
        lo, hi = bounds[i]
        np.matmul(a[lo:hi] if cut_a else a, b[lo:hi] if cut_b else b, out=out[lo:hi])
    run_parts(part, parts)
    return out
