"""GELU forward+backward, LeZero vs PyTorch side by side in one process (float32, CPU).

    python benchmarks/bench_gelu.py              # one thread for both (the kernel is serial)
    BENCH_THREADS=2 python benchmarks/bench_gelu.py

Rows: LeZero's default path (the Numba kernel for exact GELU), LeZero's NumPy reference
(``use_numba`` off) and the tanh approximation (its own kernel), each against PyTorch;
then the kernel against the NumPy reference on bare arrays, which is why the kernel exists.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import best_time, report, set_threads  # noqa: E402
from _record import run_main  # noqa: E402


def fwd_bwd_pair(n, approximate, use_numba):
    """(LeZero seconds, PyTorch seconds) for y = gelu(x); y.backward(gy) on n elements."""
    import torch

    import lezero as lz
    import lezero.functions as F
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n).astype(np.float32)
    gy = rng.standard_normal(n).astype(np.float32)
    v = lz.Variable(x)
    t = torch.tensor(x, requires_grad=True)
    tg = torch.tensor(gy)

    def ours():
        with lz.using_config("use_numba", use_numba):
            v.cleargrad()
            F.gelu(v, approximate=approximate).backward(grad=gy)

    def theirs():
        t.grad = None
        torch.nn.functional.gelu(t, approximate=approximate).backward(tg)

    ours()                       # compile / warm caches before timing
    np.testing.assert_allclose(v.grad.data, _torch_grad(t, tg, approximate), rtol=1e-4,
                               atol=1e-5)
    repeat = 7 if n <= 1 << 16 else 5
    return best_time(ours, repeat, number=10 if n <= 1 << 16 else 1), \
        best_time(theirs, repeat, number=10 if n <= 1 << 16 else 1)


def _torch_grad(t, tg, approximate):
    import torch
    t.grad = None
    torch.nn.functional.gelu(t, approximate=approximate).backward(tg)
    return t.grad.numpy()


def kernel_vs_reference(n):
    """(Numba kernel seconds, NumPy reference seconds) for forward + gradient arrays."""
    from lezero.kernels.gelu import gelu_grad_ref as gelu_grad_array, gelu_ref as gelu_array
    from lezero.kernels.gelu import gelu_grad_numba as gelu_backward, gelu_numba as gelu_forward
    rng = np.random.default_rng(1)
    x = rng.standard_normal(n).astype(np.float32)
    gy = rng.standard_normal(n).astype(np.float32)
    kernel = lambda: (gelu_forward(x), gelu_backward(x, gy))             # noqa: E731
    ref = lambda: (gelu_array(x, "none"), gelu_grad_array(x, gy, "none"))  # noqa: E731
    return best_time(kernel, 5), best_time(ref, 5)


def main():
    from lezero import kernels
    threads = set_threads(int(os.environ.get("BENCH_THREADS", 1)))
    print(f"threads: {threads} (PyTorch intra-op; LeZero's GELU kernel is single-threaded)")
    print(f"numba available: {kernels.numba_available()}")
    for n in (1 << 12, 1 << 16, 1 << 20):
        rows = [
            ("exact, default (numba)", *fwd_bwd_pair(n, "none", True), None),
            ("exact, NumPy reference", *fwd_bwd_pair(n, "none", False), None),
            ("tanh approximation", *fwd_bwd_pair(n, "tanh", True), None),
        ]
        report(f"GELU forward+backward, {n} float32 elements", rows)
    if kernels.numba_available():
        print("\n== Numba kernel vs NumPy reference (bare arrays, forward + gradient)")
        for n in (1 << 16, 1 << 20):
            k, r = kernel_vs_reference(n)
            print(f"{n:>10} elements: kernel {k * 1e3:8.3f} ms, NumPy {r * 1e3:8.3f} ms, "
                  f"speed-up {r / k:5.2f}x")


if __name__ == "__main__":
    run_main(main)
