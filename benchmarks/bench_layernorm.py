"""layer_norm forward+backward, LeZero vs PyTorch side by side (float32, CPU).

    python benchmarks/bench_layernorm.py              # one thread for both
    BENCH_THREADS=2 python benchmarks/bench_layernorm.py
    BENCH_CLOCK=cpu python benchmarks/bench_layernorm.py   # this thread's CPU time

Each row times ``y = layer_norm(x, (D,), weight, bias); y.backward(gy)`` (gradients for x,
weight and bias) after a warm-up, as the best of several rounds; LeZero runs its default
path (the Numba kernel where it is enabled) and, for comparison, the NumPy reference.
The gradients are compared with PyTorch's before timing.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import report, set_threads  # noqa: E402
from _record import run_main  # noqa: E402
from _common import best_time  # noqa: E402  (wall clock, or CPU with BENCH_CLOCK=cpu)

SHAPES = [(64, 128, 768), (8, 512, 1024), (4096, 64)]


def pair(shape, use_numba):
    """(LeZero seconds, PyTorch seconds) for one forward+backward of layer_norm."""
    import torch

    import lezero as lz
    import lezero.functions as F
    rng = np.random.default_rng(0)
    d = shape[-1]
    x = rng.standard_normal(shape).astype(np.float32)
    gy = rng.standard_normal(shape).astype(np.float32)
    w = rng.uniform(0.5, 1.5, d).astype(np.float32)
    b = rng.standard_normal(d).astype(np.float32)
    ours_in = [lz.Variable(a) for a in (x, w, b)]
    theirs_in = [torch.tensor(a, requires_grad=True) for a in (x, w, b)]
    t_gy = torch.from_numpy(gy)

    def ours():
        with lz.using_config("use_numba", use_numba):
            for v in ours_in:
                v.cleargrad()
            F.layer_norm(ours_in[0], (d,), ours_in[1], ours_in[2]).backward(grad=gy)

    def theirs():
        for t in theirs_in:
            t.grad = None
        torch.nn.functional.layer_norm(theirs_in[0], (d,), theirs_in[1],
                                       theirs_in[2]).backward(t_gy)

    ours()
    theirs()
    for v, t in zip(ours_in, theirs_in):
        np.testing.assert_allclose(v.grad.data, t.grad.numpy(), rtol=2e-3, atol=2e-3)
    number = 3 if x.size <= 1 << 20 else 1
    return best_time(ours, 11, number), best_time(theirs, 11, number)


def main():
    from lezero import kernels
    threads = set_threads(int(os.environ.get("BENCH_THREADS", 1)))
    print(f"threads: {threads}; numba available: {kernels.numba_available()}; "
          f"clock: {os.environ.get('BENCH_CLOCK', 'wall')}")
    rows = []
    for shape in SHAPES:
        if kernels.numba_available():
            rows.append((f"{shape} default (numba)", *pair(shape, True), None))
        rows.append((f"{shape} NumPy reference", *pair(shape, False), None))
    report("layer_norm forward+backward (x, weight, bias), float32", rows)


if __name__ == "__main__":
    run_main(main)
