"""Max pooling with indices, forward: LeZero's kernels against PyTorch CPU, one thread.

    python benchmarks/bench_pooling.py
    python benchmarks/bench_pooling.py --record pooling      # docs/performance.md's block

Rows: LeNet's two poolings (2x2, stride 2) and a ResNet stem pooling (3x3, stride 2,
padding 1) at two sizes, on ReLU outputs (half zeros, the rest random: the winning tap of a window is
unpredictable, as in training).  Printed per shape: nanoseconds per output of the fast
kernel (branch-free running maximum), of the exact kernel (PyTorch's tie and NaN rules
with branches; it reruns a part only when the fast one finds a NaN), of the whole
operator ``F.max_pool2d`` and of PyTorch's ``max_pool2d(return_indices=True)``, and of
the operator without positions under ``no_grad`` (inference), in alternating rounds.
"""
import os
import sys

for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ[var] = "1"

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import interleaved_times, set_threads  # noqa: E402
from _record import run_main  # noqa: E402

CASES = [  # (N, C, H, W), kernel, stride, padding
    ((64, 6, 28, 28), 2, 2, 0),
    ((64, 16, 10, 10), 2, 2, 0),
    ((8, 64, 112, 112), 3, 2, 1),
    ((2, 64, 80, 80), 3, 2, 1),         # ResNet-18's stem pooling at b2 160x160
]


def _kernel_fns(x, k, s, p):
    """The fast and the exact Numba kernel on ``x`` as (R, H, W), into fixed outputs."""
    from lezero.functions.pooling.common import pooled_size
    from lezero.kernels import pooling as K
    rows = x.reshape((-1,) + x.shape[2:])
    out_size = tuple(pooled_size(n, k, s, p, 1, False) for n in x.shape[2:])
    out = np.empty((rows.shape[0],) + out_size, x.dtype)
    arg = np.empty(out.shape, np.int64)
    K.max_pool(rows[:1], (k, k), (s, s), (p, p), (1, 1), out_size)     # compile
    _, taps = K._window_taps("bench_pooling", rows, (k, k), (s, s), (p, p), (1, 1), out_size)
    inside = K._inside(taps, k)             # the windows wholly inside the input
    fast = (lambda: K._max_pool2x2(rows, out, arg)) if (k, s, p) == (2, 2, 0) else \
        (lambda: K._max_pool2d(rows, 1, 1, *taps, out, arg, *inside))
    return fast, lambda: K._max_pool2d_exact(rows, 1, 1, *taps, out, arg), out.size


def main():
    import torch

    import lezero as lz
    import lezero.functions as F
    set_threads(1)
    rng = np.random.default_rng(0)
    print("max pooling forward with indices, 1 thread, ns per output (median of rounds)")
    print(f"{'input':<22}{'window':>8}{'fast':>8}{'exact':>8}{'LeZero op':>11}{'PyTorch':>9}"
          f"{'op / torch':>12}{'values op':>11}")
    for shape, k, s, p in CASES:
        x = np.maximum(rng.standard_normal(shape), 0).astype(np.float32)
        fast, exact, outputs = _kernel_fns(x, k, s, p)
        tx = torch.tensor(x)

        def ours():
            with lz.no_grad():
                F.max_pool2d(x, k, stride=s, padding=p, return_indices=True)

        def theirs():
            torch.nn.functional.max_pool2d(tx, k, s, p, return_indices=True)

        def values():           # inference: no gradient, no positions asked for
            with lz.no_grad():
                F.max_pool2d(x, k, stride=s, padding=p)
        times = interleaved_times([fast, exact, ours, theirs, values], rounds=7, warmup=2,
                                  block=3)
        ns = [float(np.median(t)) / outputs * 1e9 for t in times]
        print(f"{str(shape):<22}{f'{k}x{k}/{s}':>8}{ns[0]:>8.1f}{ns[1]:>8.1f}{ns[2]:>11.1f}"
              f"{ns[3]:>9.1f}{ns[2] / ns[3]:>12.2f}{ns[4]:>11.1f}")


if __name__ == "__main__":
    run_main(main)
