"""Two independent matrix products at once, each on one BLAS thread.

``linear``'s backward needs ``gy @ W`` (the input's gradient) and ``gy.T @ x`` (the
weight's), and neither waits for the other.  Run one after the other, each spreads over
OpenBLAS's threads; run at once (``run_parts``: one on this thread, one on a worker, BLAS
held to one thread in each), each keeps its own core and its own cache (measured on the
MLP benchmark: docs/performance.md, change 23).  Only NumPy products that are not small
(``blas.is_small``) go to two threads; ``lz.Config.pair_gemms = False`` turns it off,
and so does ``lz.Config.conv_threads = 1`` or the serial profile.
"""
import numpy as np

from lezero.core import get_config
from lezero.runtime.blas import is_small, matmul
from lezero.runtime.gemm_team import available as team_available
from lezero.runtime.scheduler import run_parts, threads_for
from lezero.runtime.settings import policy

__all__ = ["matmul_pair", "matmul_pair_ref", "pairs"]


def matmul_pair_ref(a1, b1, a2, b2):
    """The reference: ``(a1 @ b1, a2 @ b2)``, one after the other."""
    return a1 @ b1, a2 @ b2


def pairs(a1, b1, a2, b2):
    """Whether ``matmul_pair`` runs the two products at once: NumPy arrays, neither
    product small (those run on one thread already), two threads allowed -- and, where
    the native product workers run (``gemm_team``), neither above
    ``policy.pair_max_flops`` (such a product splits over them as well by itself)."""
    f1 = 2.0 * a1.shape[0] * a1.shape[1] * b1.shape[1]
    f2 = 2.0 * a2.shape[0] * a2.shape[1] * b2.shape[1]
    return (get_config().pair_gemms and type(a1) is np.ndarray and type(a2) is np.ndarray
            and not is_small(a1.shape[0], a1.shape[1], b1.shape[1])
            and not is_small(a2.shape[0], a2.shape[1], b2.shape[1])
            and (max(f1, f2) < policy.pair_max_flops or not team_available())
            and threads_for(2, 2, 1) >= 2)


def matmul_pair(a1, b1, a2, b2):
    """``(a1 @ b1, a2 @ b2)`` for 2-D arrays: at once on two threads where ``pairs`` says
    so, else one after the other (``matmul``: small ones on one thread)."""
    if pairs(a1, b1, a2, b2):
        # matmul: MKL's where available (one call per part), else NumPy's on one thread
        first, second = run_parts(lambda i: matmul(a1, b1) if i == 0 else matmul(a2, b2), 2)
        return first, second
    return matmul(a1, b1), matmul(a2, b2)
