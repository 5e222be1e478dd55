"""Attention memory and time: LeZero's plain vs chunked ``scaled_dot_product_attention``.

    python benchmarks/bench_attention.py            # BENCH_THREADS=n to pick the thread count

For sequence lengths 1024, 2048 and 4096 (batch 1, 1 head, head dim 64, float32) it
measures the peak memory of forward + backward with ``tracemalloc`` (NumPy reports its
allocations there) and the time of the same step, side by side with PyTorch's
``scaled_dot_product_attention``.  The plain path holds L x L score matrices, so its
peak grows 4x per doubling of L; the chunked path (blocks of 256 query rows) holds one
block of scores, so its peak grows 2x, like the inputs themselves.
"""
import os
import sys
import tracemalloc

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import best_time, report, set_threads  # noqa: E402
from _record import run_main  # noqa: E402

LENGTHS = (1024, 2048, 4096)
HEAD_DIM = 64
CHUNK = 256


def make_qkv(length, rng):
    return [rng.standard_normal((1, 1, length, HEAD_DIM)).astype(np.float32) for _ in range(3)]


def lezero_step_fn(arrays, chunk):
    import lezero as lz
    import lezero.functions as F

    def step():
        q, k, v = (lz.Variable(a) for a in arrays)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, chunk_size=chunk)
        y.backward(grad=np.ones_like(y.data))
        return q.grad
    return step


def torch_step_fn(arrays):
    import torch

    def step():
        q, k, v = (torch.tensor(a, requires_grad=True) for a in arrays)
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        y.backward(torch.ones_like(y))
        return q.grad
    return step


def peak_mib(fn):
    """Peak traced memory (MiB) of one call of ``fn``."""
    tracemalloc.start()
    fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak / 2 ** 20


def main():
    threads = set_threads()
    from threadpoolctl import threadpool_limits
    threadpool_limits(threads)
    rng = np.random.default_rng(0)
    print(f"scaled_dot_product_attention forward+backward, causal, batch 1, 1 head, "
          f"head dim {HEAD_DIM}, float32, {threads} thread(s)")
    print(f"{'L':>6}{'plain peak':>14}{'chunked peak':>15}{'scores (L*L*4)':>17}")
    rows = []
    for length in LENGTHS:
        arrays = make_qkv(length, rng)
        plain, chunked = lezero_step_fn(arrays, 0), lezero_step_fn(arrays, CHUNK)
        # Both paths give the same gradient (checked here, once per length).
        np.testing.assert_allclose(plain().data, chunked().data, rtol=1e-3, atol=1e-4)
        p_mem, c_mem = peak_mib(plain), peak_mib(chunked)
        print(f"{length:>6}{p_mem:>11.1f} MiB{c_mem:>12.1f} MiB"
              f"{length * length * 4 / 2 ** 20:>14.1f} MiB")
        theirs = best_time(torch_step_fn(arrays), repeat=3, warmup=1)
        rows.append((f"L={length} plain", best_time(plain, repeat=3, warmup=1), theirs, None))
        rows.append((f"L={length} chunked ({CHUNK} rows)", best_time(chunked, repeat=3,
                                                                      warmup=1), theirs, None))
    report("time of the same step vs PyTorch's scaled_dot_product_attention", rows)


if __name__ == "__main__":
    run_main(main)
