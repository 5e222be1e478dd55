"""Softmax cross entropy forward+backward, LeZero vs PyTorch side by side (float32, CPU).

    python benchmarks/bench_softmax_ce.py             # one thread for both
    BENCH_THREADS=2 python benchmarks/bench_softmax_ce.py
    BENCH_CLOCK=cpu python benchmarks/bench_softmax_ce.py   # this thread's CPU time

Each row times ``loss = cross_entropy(logits, target); loss.backward()`` for class-index
targets (plain, label smoothing, class weights) and probability targets, after a warm-up,
as the best of several rounds.  Both gradients are compared before timing.

On a machine shared with other jobs, wall-clock times include the moments this process
waits for a core; ``BENCH_CLOCK=cpu`` (single thread only) counts the CPU time of the
calling thread instead, which is what an idle machine would show.  There is no Numba
kernel for cross entropy: the work is dominated by ``exp``, where NumPy's SIMD loop beats
Numba's scalar ``math.exp`` (Numba here has no vectorised math library).
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import best_time, report, set_threads  # noqa: E402
from _record import run_main  # noqa: E402


CASES = [  # (name, (N, C), keyword arguments)
    ("(256, 1000) class indices", (256, 1000), {}),
    ("(256, 1000) label_smoothing=0.1", (256, 1000), {"label_smoothing": 0.1}),
    ("(256, 1000) class weights", (256, 1000), {"weight": True}),
    ("(256, 1000) probabilities", (256, 1000), {"probs": True}),
    ("(2048, 1000) class indices", (2048, 1000), {}),
    ("(512, 32000) class indices", (512, 32000), {}),
]


def pair(shape, kw):
    """(LeZero seconds, PyTorch seconds) for one forward+backward of cross_entropy."""
    import torch

    import lezero as lz
    import lezero.functions as F
    rng = np.random.default_rng(0)
    n, c = shape
    x = rng.standard_normal(shape).astype(np.float32) * 3
    kw = dict(kw)
    if kw.pop("probs", False):
        p = rng.uniform(size=shape).astype(np.float32)
        target = p / p.sum(axis=1, keepdims=True)
    else:
        target = rng.integers(0, c, n)
    if kw.pop("weight", False):
        kw["weight"] = rng.uniform(0.5, 2.0, c).astype(np.float32)
    t_kw = {k: torch.from_numpy(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()}
    v = lz.Variable(x)
    t = torch.tensor(x, requires_grad=True)
    t_target = torch.from_numpy(target)

    def ours():
        v.cleargrad()
        F.cross_entropy(v, target, **kw).backward()

    def theirs():
        t.grad = None
        torch.nn.functional.cross_entropy(t, t_target, **t_kw).backward()

    ours()
    theirs()
    np.testing.assert_allclose(v.grad.data, t.grad.numpy(), rtol=1e-4, atol=1e-7)
    number = 5 if x.size <= 1 << 20 else 1
    return best_time(ours, 15, number), best_time(theirs, 15, number)


def main():
    threads = set_threads(int(os.environ.get("BENCH_THREADS", 1)))
    clock = os.environ.get("BENCH_CLOCK", "wall")
    print(f"threads: {threads} (PyTorch intra-op; LeZero's NumPy path is single-threaded); "
          f"clock: {clock}")
    rows = [(name, *pair(shape, kw), None) for name, shape, kw in CASES]
    report("cross_entropy forward+backward, float32 logits", rows)


if __name__ == "__main__":
    run_main(main)
