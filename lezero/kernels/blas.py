"""Small matrix products on one BLAS thread.

OpenBLAS threads a GEMM once it passes a few hundred thousand multiply-adds, so the
small products of LeNet's linear layers (64x400x120) or of an LSTM step (20x256x1024)
fork and join its thread pool.  On a quiet machine that saves a few microseconds; on a
busy one (here: 2 cores shared by several processes) a join waits until the helper
thread gets a time slice, and one such product took 7-12 ms instead of 0.08 ms
(``lz.TimerHook`` over LeNet steps; docs/performance.md, 2026-12-03).  ``matmul`` runs products below
``SMALL_FLOPS`` with BLAS held to one thread, and ``one_blas_thread()`` does the same
for a block of them (the steps of a recurrent layer).  The result is the same product up
to rounding: with one thread OpenBLAS may block the summed axis differently.

The threshold, 8 MFLOP, sits between LeNet's linear layers (6.1 and 1.3 MFLOP, isolated
products whose thread wake-up costs more than it saves inside a training step) and an
LSTM step's recurrent product (20x256x1024, 10.5 MFLOP, 35 back-to-back products that keep
BLAS's threads awake: 220 us on two threads against 580 on one).  On a quiet machine
(2026-12-04, ``benchmarks/bench_settings_ab.py``-style rounds) moving it from 20 to 8
MFLOP took the LSTM layer from 1.21-1.31x PyTorch's time to 0.99-1.07x and left LeNet
unchanged.

The setting ``lz.Config.small_gemm_one_thread`` (default True) turns it off.  Without
threadpoolctl, or for CuPy arrays, the products run as they are.
"""
import contextlib

import numpy as np

from lezero.core import get_config, register_setting

register_setting("small_gemm_one_thread", True)

SMALL_FLOPS = 8e6          # see above: where a thread join costs more than it saves

_libs = []                 # the BLAS controllers (filled on first use; [False] if none)


def _controllers():
    if not _libs:
        try:
            import threadpoolctl
            found = threadpoolctl.ThreadpoolController().select(user_api="blas")
            _libs.extend(found.lib_controllers or [False])
        except Exception:          # not installed, or it cannot inspect this process
            _libs.append(False)
    return [c for c in _libs if c]


def one_blas_thread(enabled=True):
    """Hold NumPy's BLAS to one thread inside the block (when ``enabled`` and the
    ``small_gemm_one_thread`` setting is on); the previous counts come back after it."""
    return held_to_one_thread(enabled and get_config().small_gemm_one_thread)


@contextlib.contextmanager
def held_to_one_thread(enabled=True):
    """Hold NumPy's BLAS to one thread inside the block (when ``enabled``), whatever the
    setting: the parts of a split kernel need it.  Cheaper than threadpoolctl's ``limit``
    (5 us against 25 here): it only touches the BLAS libraries, found once."""
    libs = _controllers() if enabled else ()
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


def is_small(m, k, n):
    """True when an (m, k) @ (k, n) product is below ``SMALL_FLOPS``."""
    return 2.0 * m * k * n < SMALL_FLOPS


def matmul_ref(a, b):
    """The reference: NumPy's product as it is."""
    return a @ b


def matmul(a, b):
    """``a @ b`` for 2-D arrays, on one BLAS thread when the product is small."""
    if type(a) is np.ndarray and a.ndim == 2 and b.ndim == 2 \
            and is_small(a.shape[0], a.shape[1], b.shape[1]) and get_config().small_gemm_one_thread:
        with one_blas_thread():
            return a @ b
    return a @ b
