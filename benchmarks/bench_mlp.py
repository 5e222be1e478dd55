"""MLP training step (784-1000-1000-10, ReLU, batch 100, cross entropy, SGD): LeZero vs PyTorch.

    python benchmarks/bench_mlp.py

Target (issue 22): at most 1.0x PyTorch's time.  NumPy's matmuls alone are printed too:
they are the floor any NumPy framework sits on.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import numpy_matmul_peak, report, round_ratios, set_threads  # noqa: E402
from _record import run_main  # noqa: E402

SIZES = [784, 1000, 1000, 10]
BATCH = 100
TARGET = 1.0        # issue 22: the step at most this times PyTorch's (printed in the report)


def make_weights(rng):
    ws = []
    for n_in, n_out in zip(SIZES[:-1], SIZES[1:]):
        bound = 1 / np.sqrt(n_in)
        ws.append(rng.uniform(-bound, bound, (n_out, n_in)).astype(np.float32))
        ws.append(rng.uniform(-bound, bound, n_out).astype(np.float32))
    return ws


def lezero_loss(params, x, t):
    """The forward pass and loss in LeZero (``params``: weight, bias, weight, bias ...)."""
    import lezero.functions as F
    h = x
    for i in range(0, len(params), 2):
        h = F.linear(h, params[i], params[i + 1])
        if i + 2 < len(params):
            h = F.relu(h)
    return F.cross_entropy(h, t)


def torch_loss(params, x, t):
    """The same forward pass and loss in PyTorch (``x``, ``t``: tensors)."""
    import torch
    h = x
    for i in range(0, len(params), 2):
        h = torch.nn.functional.linear(h, params[i], params[i + 1])
        if i + 2 < len(params):
            h = torch.relu(h)
    return torch.nn.functional.cross_entropy(h, t)


def lezero_step_fn(weights, x, t):
    import lezero as lz
    from lezero import optim
    params = [lz.Parameter(w.copy()) for w in weights]
    opt = optim.SGD(params, lr=0.01)

    def step():
        loss = lezero_loss(params, x, t)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return step


def torch_step_fn(weights, x, t):
    import torch
    params = [torch.tensor(w, requires_grad=True) for w in weights]
    opt = torch.optim.SGD(params, lr=0.01)
    xt, tt = torch.from_numpy(x), torch.from_numpy(t)

    def step():
        loss = torch_loss(params, xt, tt)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return step


def numpy_matmuls_fn(weights, x):
    """Just the nine GEMMs of a training step (3 forward, 6 backward)."""
    ws = weights[0::2]

    def step():
        acts = [x]
        for w in ws:
            acts.append(acts[-1] @ w.T)
        g = np.ones_like(acts[-1])
        for i in reversed(range(len(ws))):
            g.T @ acts[i]
            g = g @ ws[i]
    return step


def main():
    set_threads()
    rng = np.random.default_rng(0)
    weights = make_weights(rng)
    x = rng.standard_normal((BATCH, SIZES[0])).astype(np.float32)
    t = rng.integers(0, SIZES[-1], BATCH).astype(np.int64)
    fns = [lezero_step_fn(weights, x, t), torch_step_fn(weights, x, t),
           numpy_matmuls_fn(weights, x)]
    ratios, (ours, theirs, floor) = round_ratios(fns, rounds=9, block=3)   # median seconds
    report("MLP 784-1000-1000-10 training step, batch 100", [
        ("LeZero step vs PyTorch (median s)", ours, theirs, None),
        ("NumPy matmuls alone vs PyTorch", floor, theirs, None),
    ])
    print(f"median of per-round ratios (warm alternating rounds): step {ratios[0]:.2f} "
          f"(target <= {TARGET:g}: {'ok' if ratios[0] <= TARGET else 'MISS'}), "
          f"NumPy matmuls alone {ratios[2]:.2f}")
    flops = 6 * BATCH * sum(a * b for a, b in zip(SIZES[:-1], SIZES[1:]))
    print(f"LeZero {flops / ours / 1e9:.1f} GFLOP/s; NumPy matmul peak "
          f"{numpy_matmul_peak():.1f} GFLOP/s on this machine")


if __name__ == "__main__":
    run_main(main)
