"""Per-operation framework overhead: a one-element add, LeZero vs PyTorch, one process.

    python benchmarks/bench_overhead.py

Targets (issue 2): forward <= 2.0x PyTorch; forward+backward <= 0.4x PyTorch (PyTorch's
backward() call is heavy; DeZero measures about 0.4x here).
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import best_time, report, set_threads  # noqa: E402


def main():
    import torch

    import lezero as lz
    set_threads()
    n = 20000

    a, b = lz.Variable(np.ones(1, np.float32)), lz.Variable(np.ones(1, np.float32))
    ta = torch.ones(1, requires_grad=True)
    tb = torch.ones(1, requires_grad=True)

    def lz_fwd():
        for _ in range(n):
            a + b

    def t_fwd():
        for _ in range(n):
            ta + tb

    def lz_fb():
        for _ in range(n):
            y = a + b
            y.backward()

    def t_fb():
        for _ in range(n):
            y = ta + tb
            y.backward()

    def lz_nograd():
        with lz.no_grad():
            for _ in range(n):
                a + b

    def t_nograd():
        with torch.no_grad():
            for _ in range(n):
                ta + tb

    rows = [
        ("add forward (graph recorded)", best_time(lz_fwd, 5) / n, best_time(t_fwd, 5) / n, 2.0),
        ("add forward+backward", best_time(lz_fb, 5) / n, best_time(t_fb, 5) / n, 0.4),
        ("add forward, no_grad", best_time(lz_nograd, 5) / n, best_time(t_nograd, 5) / n, None),
    ]
    report("one-element add: per-call time", rows)


if __name__ == "__main__":
    main()
