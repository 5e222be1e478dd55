"""Two independent matrix products at once, each on one BLAS thread.

``linear``'s backward needs ``gy @ W`` (the input's gradient) and ``gy.T @ x`` (the
weight's), and neither waits for the other.  Run one after the other, each spreads over
OpenBLAS's two threads; run at once (``threads.run_parts``: one on this thread, one on a
worker, BLAS held to one thread in each), each keeps its own core and its own cache.  On
the MLP benchmark's second layer (100x1000 by 1000x1000, both products) that took 2.49-2.52
ms against 2.62-2.65, and the whole MLP step went from 0.97-1.00 of PyTorch's time to
0.94-0.98; in the VM's slow-memory spells, from 1.10-1.14 to 0.98-1.01
(docs/performance.md, change 23, 2026-12-06).

Only products that are not small (``blas.is_small``: those already run on one thread, and
a worker's wake-up costs more than they take) and only NumPy arrays go to two threads.
The setting ``lz.Config.pair_gemms`` (default True) turns it off, and
``lz.Config.conv_threads = 1`` turns it off with every other split.  A product on one
thread may round differently from the same product on two (OpenBLAS can block the summed
axis differently), as ``blas.matmul`` notes.
"""
import numpy as np

from lezero.core import get_config, register_setting
from lezero.kernels.blas import is_small, matmul
from lezero.kernels.threads import run_parts, threads_for

__all__ = ["matmul_pair", "matmul_pair_ref", "pairs"]

register_setting("pair_gemms", True)


def matmul_pair_ref(a1, b1, a2, b2):
    """The reference: ``(a1 @ b1, a2 @ b2)``, one after the other."""
    return a1 @ b1, a2 @ b2


def pairs(a1, b1, a2, b2):
    """Whether ``matmul_pair`` runs the two products at once."""
    return (get_config().pair_gemms and type(a1) is np.ndarray and type(a2) is np.ndarray
            and not is_small(a1.shape[0], a1.shape[1], b1.shape[1])
            and not is_small(a2.shape[0], a2.shape[1], b2.shape[1])
            and threads_for(2, 2, 1) >= 2)


def matmul_pair(a1, b1, a2, b2):
    """``(a1 @ b1, a2 @ b2)`` for 2-D arrays: at once on two threads where ``pairs`` says
    so, else one after the other (``blas.matmul``: small ones on one thread)."""
    if pairs(a1, b1, a2, b2):
        first, second = run_parts(lambda i: a1 @ b1 if i == 0 else a2 @ b2, 2)
        return first, second
    return matmul(a1, b1), matmul(a2, b2)
