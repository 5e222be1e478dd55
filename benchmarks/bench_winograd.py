"""Winograd's tile transforms and its filter transform, one thread, at ResNet's layer sizes.

    python benchmarks/bench_winograd.py

Two design choices of ``lezero/kernels/winograd.py`` and ``functions/conv/winograd.py``,
each beside what it replaced, in alternating rounds in one process:

* the tile transforms (``tiles_in``: x -> V, ``tiles_out``: M -> y) run a block of planes
  at a time (``plane_block``: ~256 KB of buffers), so each of the alpha^2 rows of V is
  written (read) as one run, against one plane at a time (``block_floats=0``);
* a weight declared fixed (``lezero.functions.conv.declare_fixed``: inference fusion's
  folded weights) keeps U = G w G^T between calls, against a weight whose U is made each
  call: the whole forward convolution under ``no_grad``.

Printed: milliseconds (median of rounds) and the ratio new / old.
"""
import os
import sys

for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ[var] = "1"

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import interleaved_times, set_threads  # noqa: E402
from _record import run_main  # noqa: E402

# (N, C, H, m): ResNet-18's first two stages at b2 160x160 and b8 224x224, ResNet-50's
# third stage at b1 224x224 (LeZero's cost model picks F(4x4) or F(2x2) there)
LAYERS = [(2, 64, 40, 4), (2, 128, 20, 2), (8, 64, 56, 4), (8, 128, 28, 2), (1, 256, 14, 2)]


def _medians(fns):
    return np.median(np.array(interleaved_times(fns, rounds=9, warmup=2, block=3)), axis=1)


def transforms():
    from lezero.kernels import winograd as wk
    print("tile transforms, ms: one plane at a time -> blocks of planes")
    print(f"{'x (N, C, H, W)':<22}{'F(m)':>6}{'in: plane':>11}{'blocks':>8}{'ratio':>7}"
          f"{'out: plane':>12}{'blocks':>8}{'ratio':>7}")
    rng = np.random.default_rng(0)
    for n, c, h, m in LAYERS:
        at, _, bt = (np.ascontiguousarray(t, np.float32) for t in wk.winograd_matrices(m))
        th = -(-h // m)
        x = rng.standard_normal((n, c, h, h)).astype(np.float32)
        v = np.empty(((m + 2) ** 2, c, n * th * th), np.float32)
        y = np.zeros_like(x)
        t = _medians([lambda b=b: wk.tiles_in_numba(x, bt, v, m, 1, 1, th, th, b)
                      for b in (0, wk.BLOCK_FLOATS)]
                     + [lambda b=b: wk.tiles_out_numba(v, at, y, m, 0, 0, th, th, b)
                        for b in (0, wk.BLOCK_FLOATS)]) * 1e3
        print(f"{str((n, c, h, h)):<22}{m:>6}{t[0]:>11.3f}{t[1]:>8.3f}{t[1] / t[0]:>7.2f}"
              f"{t[2]:>12.3f}{t[3]:>8.3f}{t[3] / t[2]:>7.2f}")


def fixed_weights():
    import lezero as lz
    import lezero.functions as F
    from lezero.functions.conv import declare_fixed
    print("\nforward convolution under no_grad, ms: U made each call -> weight declared fixed")
    print(f"{'x (N, C, H, W)':<22}{'F(m)':>6}{'each call':>11}{'fixed':>8}{'ratio':>7}")
    rng = np.random.default_rng(1)
    for n, c, h, m in LAYERS:
        x = lz.Variable(rng.standard_normal((n, c, h, h)).astype(np.float32))
        w = (rng.standard_normal((c, c, 3, 3)) / (3 * c ** 0.5)).astype(np.float32)
        fixed = w.copy()
        declare_fixed(fixed)
        algo = f"winograd_{m}x{m}"

        def run(weight):
            with lz.no_grad():
                F.conv2d(x, weight, padding=1, algo=algo)
        t = _medians([lambda: run(w), lambda: run(fixed)]) * 1e3
        print(f"{str((n, c, h, h)):<22}{m:>6}{t[0]:>11.3f}{t[1]:>8.3f}{t[1] / t[0]:>7.2f}")


def main():
    set_threads(1)
    transforms()
    fixed_weights()


if __name__ == "__main__":
    run_main(main)
