"""LeZero's float32 products on Intel MKL against NumPy's OpenBLAS and PyTorch, one process.

    python benchmarks/bench_gemm.py            # 2 threads each (BENCH_THREADS picks another)
    python benchmarks/bench_gemm.py --quick

Each row runs ``lezero.runtime.blas.matmul`` (what ``Linear`` and the products of the
convolutions call) over a set of distinct weight matrices, as a model's layers do (so the
weights come from memory, not from cache), with ``policy.gemm = "mkl"`` and ``"numpy"``,
and PyTorch's ``linear`` on the same arrays, in warm alternating rounds; the ratios are
medians of the per-round ratios.  Shapes: BERT-base's and ViT-B/16's projections, GPT-2's
vocabulary head, one-token decoding, the MLP benchmark's layers, a 1x1 convolution of
ResNet-50 as a GEMM.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import round_ratios, set_threads  # noqa: E402
from _record import run_main  # noqa: E402

# (label, m, k, n, how many distinct weights one round multiplies)
SHAPES = [
    ("BERT b2 s128 attention proj", 256, 768, 768, 12),
    ("BERT b2 s128 FFN up", 256, 768, 3072, 4),
    ("BERT b2 s128 FFN down", 256, 3072, 768, 4),
    ("ViT b1 FFN up", 197, 768, 3072, 4),
    ("GPT-2 b2 s128 vocabulary head", 256, 768, 50257, 1),
    ("GPT-2 decode b4 QKV", 4, 768, 2304, 12),
    ("MLP b100 784->1000", 100, 784, 1000, 8),
    ("ResNet-50 1x1 conv b1 56x56 256->64", 3136, 256, 64, 8),
]


def pair(m, k, n, count, rng):
    import torch

    from lezero.runtime import blas, policy
    a = rng.standard_normal((m, k)).astype(np.float32)
    ws = [rng.standard_normal((n, k)).astype(np.float32) for _ in range(count)]
    ta, tws = torch.from_numpy(a), [torch.from_numpy(w) for w in ws]
    np.testing.assert_allclose(blas.matmul(a, ws[0].T), a @ ws[0].T, rtol=1e-3, atol=1e-3)

    def lezero(mode):
        def run():
            with policy.using(gemm=mode):
                for w in ws:
                    blas.matmul(a, w.T)
        return run

    def torch_run():
        for w in tws:
            torch.nn.functional.linear(ta, w)
    return lezero("mkl"), lezero("numpy"), torch_run


def main():
    from lezero.runtime import mkl
    quick = "--quick" in sys.argv
    threads = set_threads(int(os.environ.get("BENCH_THREADS", 2)))
    found = mkl.library() is not None
    print(f"threads: {threads}; MKL {'found' if found else 'NOT found (pip install mkl)'}; "
          "time per product; ratios are medians of per-round ratios")
    print(f"{'product':38s} {'m x k x n':>18s} {'MKL':>9s} {'NumPy':>9s} {'torch':>9s} "
          f"{'MKL/NumPy':>10s} {'MKL/torch':>10s}")
    rng = np.random.default_rng(0)
    for label, m, k, n, count in SHAPES[:3] if quick else SHAPES:
        fns = pair(m, k, n, count, rng)
        ratios, secs = round_ratios(list(fns), rounds=3 if quick else 9, ref=0)
        per = [s / count for s in secs]
        print(f"{label:38s} {f'{m}x{k}x{n}':>18s} {per[0] * 1e3:8.2f}ms {per[1] * 1e3:8.2f}ms "
              f"{per[2] * 1e3:8.2f}ms {1 / ratios[1]:10.2f} {1 / ratios[2]:10.2f}")


if __name__ == "__main__":
    run_main(main)
