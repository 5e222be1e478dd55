"""conv2d forward+backward, LeZero against PyTorch CPU, same thread count, one run.

    python benchmarks/bench_conv.py              # the issue's case: 3x3, 64->64, 32x32, batch 32
    python benchmarks/bench_conv.py --table      # also: which algorithm wins at which shape
    python benchmarks/bench_conv.py --real       # torchvision's ResNet-18/50, MobileNetV2 layers
    python benchmarks/bench_conv.py --models     # ResNet-18 and MobileNetV2 b8 inference
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


# (label, Cin, Cout, kernel, stride, padding, size, groups): layers of torchvision's
# ResNet-18/50 (stem, 3x3 at 56..7, strided 3x3, 1x1 projections and bottlenecks) and
# MobileNetV2 (stem, depthwise 3x3 at 112..7, 1x1 expansions and projections)
REAL = [
    ("R stem 7x7 s2 3>64 @224", 3, 64, 7, 2, 3, 224, 1),
    ("R 3x3 64 @56", 64, 64, 3, 1, 1, 56, 1), ("R 3x3 128 @28", 128, 128, 3, 1, 1, 28, 1),
    ("R 3x3 256 @14", 256, 256, 3, 1, 1, 14, 1), ("R 3x3 512 @7", 512, 512, 3, 1, 1, 7, 1),
    ("R 3x3 s2 64>128 @56", 64, 128, 3, 2, 1, 56, 1),
    ("R 3x3 s2 256>512 @14", 256, 512, 3, 2, 1, 14, 1),
    ("R 1x1 s2 64>128 @56", 64, 128, 1, 2, 0, 56, 1),
    ("R50 1x1 256>64 @56", 256, 64, 1, 1, 0, 56, 1),
    ("R50 1x1 1024>256 @14", 1024, 256, 1, 1, 0, 14, 1),
    ("M stem 3x3 s2 3>32 @224", 3, 32, 3, 2, 1, 224, 1),
    ("M dw 32 @112", 32, 32, 3, 1, 1, 112, 32), ("M dw s2 96 @112", 96, 96, 3, 2, 1, 112, 96),
    ("M dw 144 @56", 144, 144, 3, 1, 1, 56, 144), ("M dw 384 @14", 384, 384, 3, 1, 1, 14, 384),
    ("M dw 960 @7", 960, 960, 3, 1, 1, 7, 960),
    ("M 1x1 16>96 @112", 16, 96, 1, 1, 0, 112, 1), ("M 1x1 144>24 @56", 144, 24, 1, 1, 0, 56, 1),
    ("M 1x1 960>160 @7", 960, 160, 1, 1, 0, 7, 1),
]


def _real_pair(layer, n):
    """(LeZero inference, torch inference, LeZero fwd+bwd, torch fwd+bwd, algorithms)."""
    import torch
    import lezero as lz
    import lezero.functions as F
    from lezero.functions.conv import select
    from lezero.functions.conv.functions import problem
    from lezero.functions.conv.geometry import conv_geometry
    _, ci, co, k, s, p, h, g = layer
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, ci, h, h)).astype(np.float32)
    w = (rng.standard_normal((co, ci // g, k, k)) / np.sqrt(ci // g * k * k)).astype(np.float32)
    prob = problem(conv_geometry("conv2d", x.shape, w.shape, 2, s, p, 1, g), n, ci, co, x)
    fwd = select.choose(prob, "forward").name
    algos = "/".join([fwd] + [select.choose(prob, op, prefer=fwd).name
                              for op in ("grad_input", "grad_weight")])
    gy = rng.standard_normal(prob.y_shape).astype(np.float32)
    kw = dict(stride=s, padding=p, groups=g)
    xv, wv = lz.Variable(x), lz.Parameter(w)
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    tgy = torch.tensor(gy)

    def lz_inf():
        with lz.no_grad():
            F.conv2d(xv, wv, **kw)

    def t_inf():
        with torch.no_grad():
            torch.nn.functional.conv2d(tx, tw, **kw)

    def lz_step():
        xv.cleargrad(), wv.cleargrad()
        F.conv2d(xv, wv, **kw).backward(grad=gy)

    def t_step():
        tx.grad = tw.grad = None
        torch.nn.functional.conv2d(tx, tw, **kw).backward(tgy)
    return lz_inf, t_inf, lz_step, t_step, algos


def _ratio(ours, theirs, rounds):
    """Median over interleaved rounds of (LeZero time / PyTorch time)."""
    from _common import clock
    ours(), theirs()
    ratios = []
    for _ in range(rounds):
        t0 = clock()
        ours()
        t1 = clock()
        theirs()
        ratios.append((t1 - t0) / (clock() - t1))
    return float(np.median(ratios))


def real_table(rounds, batches=(1, 8)):
    """LeZero / PyTorch per layer at real sizes, and the algorithms auto picks."""
    print(f"\nconv2d at torchvision's layer sizes, LeZero time / PyTorch time ({THREADS} "
          f"threads; median of {rounds} interleaved rounds)")
    print("| layer | batch | inference | fwd+bwd | forward / grad_input / grad_weight |")
    print("|---|---|---|---|---|")
    for n in batches:
        for layer in REAL:
            lz_inf, t_inf, lz_step, t_step, algos = _real_pair(layer, n)
            print(f"| {layer[0]} | {n} | {_ratio(lz_inf, t_inf, rounds):.2f} | "
                  f"{_ratio(lz_step, t_step, rounds):.2f} | {algos} |", flush=True)


def models_table(rounds, batch=8, size=224):
    """ResNet-18 and MobileNetV2 inference against torchvision with the same weights."""
    import torch
    import lezero as lz
    from lezero.nn import models
    from lezero.testing.oracles import import_torchvision
    tv = import_torchvision().models
    x = np.random.default_rng(0).standard_normal((batch, 3, size, size)).astype(np.float32)
    print(f"\n| model, batch {batch}, {size}x{size}, inference | LeZero / PyTorch "
          f"({THREADS} threads, median of {rounds}) |\n|---|---|")
    for name in ("resnet18", "mobilenet_v2"):
        torch.manual_seed(0)
        ref = getattr(tv, name)().eval()
        ours = models.get_model(name)
        ours.load_state_dict({k: v.detach().numpy().copy() for k, v in ref.state_dict().items()})
        ours.eval()

        def lz_fn():
            with lz.no_grad():
                ours(x)

        def t_fn():
            with torch.no_grad():
                ref(torch.from_numpy(x))
        print(f"| {name} | {_ratio(lz_fn, t_fn, rounds):.2f} |", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--table", action="store_true", help="the algorithm-per-shape table")
    parser.add_argument("--real", action="store_true", help="ResNet/MobileNet layer sizes")
    parser.add_argument("--models", action="store_true", help="ResNet-18, MobileNetV2 b8")
    args = parser.parse_args()
    set_threads(THREADS)
    if args.real or args.models:
        if args.real:
            real_table(args.rounds)
        if args.models:
            models_table(args.rounds)
        return
    main_case(args.rounds)
    if args.table:
        winner_table(repeat=3)


if __name__ == "__main__":
    run_main(main)
