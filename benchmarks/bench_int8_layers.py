"""INT8 ResNet-18 (LeZero's PTQ of torchvision's layout), layer by layer and call by call.

    python benchmarks/bench_int8_layers.py                 # b2 160x160 and b8 224x224
    python benchmarks/bench_int8_layers.py --shape 4 192   # one batch and image size
    python benchmarks/bench_int8_layers.py --record int8_layers   # also docs/figures/int8_layers.md

Per convolution: its time on LeZero's own int8 kernel (``policy.gemm = "numpy"``) and,
where the ``mkl`` wheel loads, on MKL's integer GEMM (``"mkl"``, the timed choice off),
each the best of a few calls, with the kernel's multiply-adds per second.  Then the
whole model ``CALLS`` times in a row, under the default policy and under ``"mkl"`` (each
layer choosing between the two by its timings): mean, median and slowest call.  A
served model's latency is the mean; a median of rounds hides a slow call in sixteen.
"""
import sys
import time

import numpy as np

import _real_vision as rv
from _common import best_time, limit_threads
from _record import run_main

THREADS = 2
CALLS = 48


def _convs(model, x):
    """[(function, input array)] of each quantized convolution of one forward."""
    import lezero as lz
    from lezero.core.hooks import FunctionHook
    seen = []

    class Catch(FunctionHook):
        def forward_preprocess(self, fn, inputs):
            if type(fn).__name__ == "QuantizedConv2d":
                seen.append((fn, inputs[0]))
    with Catch(), lz.no_grad():
        model(x)
    return seen


def layers(model, x):
    """One line per convolution: shape, kernel time, MKL time, kernel GMAC/s."""
    from lezero.quantization import mkl_int8
    from lezero.runtime import mkl, policy
    has_mkl = mkl.library() is not None
    print(f"{'conv (C -> O, HxW, KxK/s)':<30}{'kernel':>10}{'MKL':>10}{'MKL/kernel':>11}"
          f"{'kernel GMAC/s':>15}")
    total = [0.0, 0.0]
    for fn, q in _convs(model, x):
        w, (n, c, h, wd) = fn.weight, q.shape
        kh, s = w.shape[2], fn.stride[0]
        oh = (h + 2 * fn.padding[0] - kh) // s + 1
        macs = n * oh * oh * w.shape[0] * c * kh * w.shape[3]
        with policy.using(gemm="numpy"):
            ours = best_time(lambda: fn.forward(q), repeat=5, warmup=1)
        theirs = float("nan")
        if has_mkl:
            adaptive, mkl_int8.ADAPTIVE = mkl_int8.ADAPTIVE, False
            try:
                with policy.using(gemm="mkl"):
                    theirs = best_time(lambda: fn.forward(q), repeat=5, warmup=1)
            finally:
                mkl_int8.ADAPTIVE = adaptive
        total[0] += ours
        total[1] += theirs
        name = f"{c} -> {w.shape[0]}, {h}x{wd}, {kh}x{kh}/{s}"
        print(f"{name:<30}{ours * 1e3:>8.2f}ms{theirs * 1e3:>8.2f}ms{theirs / ours:>11.2f}"
              f"{macs / ours / 1e9:>15.1f}")
    print(f"{'all convolutions':<30}{total[0] * 1e3:>8.2f}ms{total[1] * 1e3:>8.2f}ms"
          f"{total[1] / total[0]:>11.2f}")


def calls(model, x, label, **settings):
    """The whole model CALLS times in a row under ``settings``: mean, median, slowest."""
    import lezero as lz
    from lezero.runtime import policy
    with policy.using(**settings), lz.no_grad():
        for _ in range(6):
            model(x)
        times = []
        for _ in range(CALLS):
            start = time.perf_counter()
            model(x)
            times.append(time.perf_counter() - start)
    t = np.array(times) * 1e3
    print(f"{CALLS} calls, {label:<34} mean {t.mean():7.1f} ms  median {np.median(t):7.1f} ms"
          f"  slowest {t.max():7.1f} ms")


def main():
    args = sys.argv[1:]
    shapes = [(2, 160), (8, 224)]
    if "--shape" in args:
        i = args.index("--shape")
        shapes = [(int(args[i + 1]), int(args[i + 2]))]
    limit = limit_threads(THREADS)
    import lezero
    from lezero.runtime import mkl
    print(f"{THREADS} threads, lezero {lezero.__version__}; MKL loaded: "
          f"{mkl.library() is not None}, runs products by default here: {mkl.used()}")
    ours, _ = rv.pair("resnet18")
    for batch, size in shapes:
        shape = {"batch": batch, "size": size}
        x = rv.images(shape)
        q = rv.lezero_int8(ours.eval(), rv.images(shape, seed=1))
        print(f"\n== INT8 ResNet-18, batch {batch}, {size}x{size}")
        layers(q, x)
        calls(q, x, "default policy")
        if mkl.library() is not None:
            calls(q, x, "gemm='mkl' (timed choice per layer)", gemm="mkl")
    del limit
    return 0


if __name__ == "__main__":
    run_main(main)
