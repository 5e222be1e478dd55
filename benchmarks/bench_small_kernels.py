"""Small kernels and the cost of a split, LeZero against NumPy and PyTorch (float32, CPU).

    python benchmarks/bench_small_kernels.py
    BENCH_THREADS=2 python benchmarks/bench_small_kernels.py

Rows, each timed in alternating rounds (``_common.round_ratios``, median seconds):

* ReLU forward: LeZero's kernel (``lezero.kernels.relu.relu``), ``np.maximum(x, 0)`` and
  ``torch.relu`` on the MLP's (100, 1000) and LeNet's (64, 6, 28, 28) activations;
* layer norm forward and backward kernels on GPT-mini's (1024, 128) rows, against
  ``torch.nn.functional.layer_norm`` (forward without autograd) and its backward;
* an empty two-part ``lezero.runtime.run_parts`` (the fixed cost of splitting a kernel over
  threads) against a plain call, and two 500k-element halves of an update against one
  1M-element call.
"""
import os
import sys

THREADS = int(os.environ.get("BENCH_THREADS", 2))
for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(var, str(THREADS))

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import round_ratios, set_threads  # noqa: E402


def _row(name, fns, labels):
    _, secs = round_ratios(fns, rounds=9, block=20, ref=0)
    cells = "  ".join(f"{label} {s * 1e6:7.1f} us" for label, s in zip(labels, secs))
    print(f"{name:<30}{cells}")


def relu_rows(rng):
    import torch
    from lezero.kernels import relu
    for shape in ((100, 1000), (64, 6, 28, 28)):
        x = rng.standard_normal(shape).astype(np.float32)
        tx = torch.from_numpy(x)
        _row(f"relu forward {shape}", [lambda: relu.relu(x), lambda: np.maximum(x, 0),
                                       lambda: torch.relu(tx)],
             ["LeZero", "np.maximum", "torch"])


def layer_norm_rows(rng):
    import torch
    from lezero.kernels import layernorm
    x = rng.standard_normal((1024, 128)).astype(np.float32)
    w = rng.standard_normal(128).astype(np.float32)
    b = rng.standard_normal(128).astype(np.float32)
    gy = rng.standard_normal(x.shape).astype(np.float32)
    _, mean, rstd = layernorm.layer_norm_numba(x, w, b, 1e-5)
    tx, tw, tb = (torch.from_numpy(a).requires_grad_() for a in (x, w, b))
    tgy = torch.from_numpy(gy)
    ty = torch.nn.functional.layer_norm(tx, (128,), tw, tb)

    def torch_forward():
        with torch.no_grad():
            torch.nn.functional.layer_norm(tx, (128,), tw, tb)
    _row("layer norm forward (1024, 128)",
         [lambda: layernorm.layer_norm_numba(x, w, b, 1e-5), torch_forward],
         ["LeZero", "torch"])
    _row("layer norm backward (1024,128)",
         [lambda: layernorm.layer_norm_grad_numba(x, gy, w, mean, rstd),
          lambda: torch.autograd.grad(ty, (tx, tw, tb), tgy, retain_graph=True)],
         ["LeZero", "torch"])


def split_rows(rng):
    from lezero import runtime
    from lezero.kernels import axpy
    y = rng.standard_normal(1_000_000).astype(np.float32)
    x = rng.standard_normal(y.size).astype(np.float32)
    half = y.size // 2
    one, a = np.float32(1.0), np.float32(-1e-6)

    def halves(i):
        lo, hi = (0, half) if i == 0 else (half, y.size)
        axpy._axpby(y[lo:hi], one, x[lo:hi], a)
    _row("empty call, 2 parts", [lambda: None, lambda: runtime.run_parts(lambda i: None, 2)],
         ["plain", "run_parts"])
    _row("1M update, 2 parts", [lambda: axpy._axpby(y, one, x, a),
                                lambda: runtime.run_parts(halves, 2)],
         ["one call", "run_parts"])


def main():
    import lezero as lz
    set_threads(THREADS)
    print(f"{THREADS} threads; median seconds per call in alternating rounds")
    rng = np.random.default_rng(0)
    if not lz.kernels.numba_available():
        print("Numba is not installed: the kernels cannot run")
        return
    relu_rows(rng)
    layer_norm_rows(rng)
    split_rows(rng)


if __name__ == "__main__":
    main()
