"""Where the MLP step's time goes, phase by phase, LeZero against PyTorch.

    python benchmarks/bench_mlp_parts.py          # BENCH_RUNS=n repeats (default 3)

The workload of ``bench_mlp.py`` (784-1000-1000-10, batch 100, SGD) timed three ways on
each side in the same warm alternating rounds: the forward pass and loss, forward and
backward, and the whole step; the backward and the optimizer step are the differences.
Beside them, each phase's GEMMs alone in NumPy (3 forward; 5 backward, since the input
needs no gradient): the floor of that phase.  Each run prints median milliseconds, so the
phases add up within a run; the machine's speed moves them between runs.

Then the SGD update alone (1.8M float32 parameters, gradients in place): LeZero's kernel
in one call per parameter, the same cut in two (``lezero.runtime.run_split``), the
optimizer as it runs (``lezero.runtime.run_update`` picks one of the two), and PyTorch's
``SGD.step``.  Which of the first two is faster depends on the state of the VM's memory
(``lezero/runtime/adaptive.py``), so this table is printed per run.
"""
import os
import sys

THREADS = int(os.environ.get("BENCH_THREADS", 2))
for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ[var] = str(THREADS)

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_mlp as b  # noqa: E402
from _common import round_ratios, set_threads  # noqa: E402


def lezero_phases(weights, x, t):
    """(forward, forward+backward, step) callables on one set of LeZero parameters."""
    import lezero as lz
    from lezero import optim
    params = [lz.Parameter(w.copy()) for w in weights]
    opt = optim.SGD(params, lr=0.01)

    def fwd_bwd():
        loss = b.lezero_loss(params, x, t)
        opt.zero_grad()
        loss.backward()
    return (lambda: b.lezero_loss(params, x, t)), fwd_bwd, lambda: (fwd_bwd(), opt.step())


def torch_phases(weights, x, t):
    """The same three callables in PyTorch."""
    import torch
    params = [torch.tensor(w, requires_grad=True) for w in weights]
    opt = torch.optim.SGD(params, lr=0.01)
    xt, tt = torch.from_numpy(x), torch.from_numpy(t)

    def fwd_bwd():
        loss = b.torch_loss(params, xt, tt)
        opt.zero_grad()
        loss.backward()
    return (lambda: b.torch_loss(params, xt, tt)), fwd_bwd, lambda: (fwd_bwd(), opt.step())


def numpy_phase_gemms(weights, x):
    """(forward GEMMs, backward GEMMs) of the step in NumPy, on the same shapes."""
    ws = weights[0::2]
    acts = [x]
    for w in ws:
        acts.append(acts[-1] @ w.T)
    grads = [np.ones_like(a) for a in acts]

    def forward():
        h = x
        for w in ws:
            h = h @ w.T

    def backward():
        for i in reversed(range(len(ws))):
            grads[i + 1].T @ acts[i]                # the weight's gradient
            if i:
                grads[i + 1] @ ws[i]                # the input's (none for the data)
    return forward, backward


def update_fns(weights):
    """The SGD update alone: one call, split in two, the optimizer, PyTorch's."""
    import torch
    import lezero as lz
    from lezero import optim
    from lezero import runtime
    from lezero.kernels import axpy
    rng = np.random.default_rng(1)
    grads = [rng.standard_normal(w.shape).astype(np.float32) for w in weights]
    flat = [(w.copy().reshape(-1), g.reshape(-1)) for w, g in zip(weights, grads)]
    b, a = np.float32(1), np.float32(-0.01)

    def one_call():
        for y, x in flat:
            axpy._axpby(y, b, x, a)

    def split():
        for y, x in flat:
            parts = 2 if y.size >= 2 * runtime.policy.update_min_part_items else 1
            runtime.run_split(lambda lo, hi: axpy._axpby(y[lo:hi], b, x[lo:hi], a), y.size,
                              parts)
    params = [lz.Parameter(w.copy()) for w in weights]
    for p, g in zip(params, grads):
        p.grad = lz.Variable(g.copy())
    tparams = [torch.tensor(w.copy(), requires_grad=True) for w in weights]
    for p, g in zip(tparams, grads):
        p.grad = torch.from_numpy(g.copy())
    return [one_call, split, optim.SGD(params, lr=0.01).step,
            torch.optim.SGD(tparams, lr=0.01).step]


def one_run(fns):
    _, ms = round_ratios(fns, rounds=12, block=3)
    lf, lfb, ls, tf, tfb, ts, gf, gb = (1e3 * s for s in ms)
    rows = [("forward + loss", lf, tf, gf), ("backward", lfb - lf, tfb - tf, gb),
            ("optimizer step (and zero_grad)", ls - lfb, ts - tfb, None),
            ("whole step", ls, ts, gf + gb)]
    print(f"{'phase':32s} {'LeZero ms':>10s} {'PyTorch ms':>11s} {'ratio':>6s} {'GEMMs ms':>9s}")
    for name, ours, theirs, floor in rows:
        gemms = "-" if floor is None else f"{floor:.2f}"
        print(f"{name:32s} {ours:10.2f} {theirs:11.2f} {ours / theirs:6.2f} {gemms:>9s}")


def one_update_run(fns):
    _, ms = round_ratios(fns, rounds=12, block=3)
    names = ("one call", "split in two", "optimizer (chosen)", "PyTorch")
    print("SGD update alone, ms: " + ", ".join(f"{n} {1e3 * s:.2f}" for n, s in zip(names, ms)))


def main():
    set_threads(THREADS)
    rng = np.random.default_rng(0)
    weights = b.make_weights(rng)
    x = rng.standard_normal((b.BATCH, b.SIZES[0])).astype(np.float32)
    t = rng.integers(0, b.SIZES[-1], b.BATCH).astype(np.int64)
    fns = [*lezero_phases(weights, x, t), *torch_phases(weights, x, t),
           *numpy_phase_gemms(weights, x)]
    updates = update_fns(weights)
    print(f"MLP 784-1000-1000-10 b100 by phase, {THREADS} threads, median of warm "
          "alternating rounds")
    for run in range(int(os.environ.get("BENCH_RUNS", 3))):
        print(f"run {run + 1}")
        one_run(fns)
        one_update_run(updates)


if __name__ == "__main__":
    main()
