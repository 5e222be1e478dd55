"""conv2d forward+backward, LeZero against PyTorch CPU, same thread count, one run.

    python benchmarks/bench_conv.py              # the issue's case: 3x3, 64->64, 32x32, batch 32
    python benchmarks/bench_conv.py --table      # also: which algorithm wins at which shape
    BENCH_THREADS=1 python benchmarks/bench_conv.py

Target (issue 4): forward+backward at most 1.2x PyTorch's time.  Printed with it: the
effective GFLOP/s (3 x the direct convolution's 2*N*Cout*Cin*K*Ho*Wo flops, for the forward
and the two gradients) and NumPy's float32 matmul peak measured in the same run, each
algorithm on its own, and a plain-NumPy im2col (no Numba, no Winograd) for scale.
Timings are interleaved rounds (all contenders see the same machine load); best and median.
"""
import argparse
import os
import sys

# Thread counts must be fixed before NumPy, Numba or PyTorch start their pools.
THREADS = int(os.environ.get("BENCH_THREADS", os.cpu_count() or 1))
for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ[var] = str(THREADS)

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import interleaved_best_median, numpy_matmul_peak, report, set_threads  # noqa: E402
from _record import run_main  # noqa: E402

TARGET = 1.2


def lezero_step(x, w, gy, padding, algo="auto", use_numba=True):
    import lezero as lz
    import lezero.functions as F
    xv, wv = lz.Variable(x), lz.Parameter(w)

    def step():
        with lz.using_config("use_numba", use_numba):
            xv.cleargrad(), wv.cleargrad()
            y = F.conv2d(xv, wv, padding=padding, algo=algo)
            y.backward(grad=gy)
    return step


def torch_step(x, w, gy, padding):
    import torch
    tx, tw, tg = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True), \
        torch.tensor(gy)

    def step():
        tx.grad = tw.grad = None
        y = torch.nn.functional.conv2d(tx, tw, padding=padding)
        y.backward(tg)
    return step


def main_case(rounds):
    n, c, h, k = 32, 64, 32, 3
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, c, h, h)).astype(np.float32)
    w = (rng.standard_normal((c, c, k, k)) / np.sqrt(c * k * k)).astype(np.float32)
    gy = rng.standard_normal((n, c, h, h)).astype(np.float32)
    flops = 3 * 2 * n * c * c * k * k * h * h
    a = rng.random((1024, 1024), dtype=np.float32)
    contenders = [("LeZero auto", lezero_step(x, w, gy, 1)),
                  ("PyTorch", torch_step(x, w, gy, 1)),
                  ("matmul 1024^3", lambda: a @ a)]        # the peak, in the same rounds
    for algo in ("winograd_4x4", "winograd_2x2", "im2col", "fft"):
        contenders.append((f"LeZero {algo}", lezero_step(x, w, gy, 1, algo)))
    contenders.append(("plain NumPy im2col", lezero_step(x, w, gy, 1, "im2col", False)))
    res = dict(zip([name for name, _ in contenders],
                   interleaved_best_median([fn for _, fn in contenders], rounds)))
    peak = 2 * 1024 ** 3 / res.pop("matmul 1024^3")[0] / 1e9
    peak = max(peak, numpy_matmul_peak())
    t_best, t_med = res["PyTorch"]
    print(f"\nconv2d 3x3, {c}->{c} channels, {h}x{h}, batch {n}, forward+backward "
          f"({THREADS} threads; {flops / 1e9:.2f} GFLOP direct-equivalent)")
    print(f"NumPy float32 matmul peak in this run (1024^3, best): {peak:.1f} GFLOP/s")
    print(f"{'':<22}{'best ms':>10}{'median ms':>11}{'GFLOP/s':>9}{'vs torch':>10}")
    for name, (best, med) in res.items():
        print(f"{name:<22}{best * 1e3:>10.1f}{med * 1e3:>11.1f}{flops / best / 1e9:>9.1f}"
              f"{best / t_best:>10.2f}")
    report("conv2d fwd+bwd (best of interleaved rounds)",
           [("3x3 64->64 32x32 b32", res["LeZero auto"][0], t_best, TARGET)])
    report("conv2d fwd+bwd (median of interleaved rounds)",
           [("3x3 64->64 32x32 b32", res["LeZero auto"][1], t_med, TARGET)])


# (label, x shape, w shape, kwargs): typical layers of small CNNs
SHAPES = [
    ("3x3 s1, 64ch 32x32 b32", (32, 64, 32, 32), (64, 64, 3, 3), dict(padding=1)),
    ("3x3 s1, 128ch 16x16 b8", (8, 128, 16, 16), (128, 128, 3, 3), dict(padding=1)),
    ("3x3 s1, 16ch 32x32 b32", (32, 16, 32, 32), (16, 16, 3, 3), dict(padding=1)),
    ("3x3 s1, 256ch 8x8 b8", (8, 256, 8, 8), (256, 256, 3, 3), dict(padding=1)),
    ("3x3 s1, 3->16 64x64 b8", (8, 3, 64, 64), (16, 3, 3, 3), dict(padding=1)),
    ("3x3 s2, 64->128 32x32 b8", (8, 64, 32, 32), (128, 64, 3, 3), dict(padding=1, stride=2)),
    ("1x1, 64->128 16x16 b16", (16, 64, 16, 16), (128, 64, 1, 1), {}),
    ("3x3 depthwise 64ch 32x32 b8", (8, 64, 32, 32), (64, 1, 3, 3), dict(padding=1, groups=64)),
    ("5x5 LeNet c1 1->6 32x32 b64", (64, 1, 32, 32), (6, 1, 5, 5), {}),
    ("5x5 LeNet c2 6->16 14x14 b64", (64, 6, 14, 14), (16, 6, 5, 5), {}),
    ("7x7 s2 stem 3->32 64x64 b8", (8, 3, 64, 64), (32, 3, 7, 7), dict(padding=3, stride=2)),
    ("9x9 s1, 16ch 48x48 b4", (4, 16, 48, 48), (16, 16, 9, 9), dict(padding=4)),
]


def winner_table(repeat):
    import lezero.functions as F
    print("\n| layer | op | measured winner (ms) | runner-up (ms) | cost model picks |")
    print("|---|---|---|---|---|")
    for label, xs, ws, kw in SHAPES:
        for op in ("forward", "grad_input", "grad_weight"):
            ex = F.conv_explain(xs, ws, op=op, repeat=repeat, show=False, **kw)
            rows = sorted((r for r in ex.rows if not r["unsupported"]),
                          key=lambda r: r["measured_ms"])
            second = f"{rows[1]['algo']} ({rows[1]['measured_ms']:.1f})" if len(rows) > 1 else "-"
            print(f"| {label} | {op} | **{rows[0]['algo']}** ({rows[0]['measured_ms']:.1f}) "
                  f"| {second} | {ex.chosen} |", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--table", action="store_true", help="the algorithm-per-shape table")
    args = parser.parse_args()
    set_threads(THREADS)
    main_case(args.rounds)
    if args.table:
        winner_table(repeat=3)


if __name__ == "__main__":
    run_main(main)
