"""LeNet-5 training step, batch 64: LeZero against PyTorch CPU, same weights, same threads.

    python benchmarks/bench_lenet.py            # BENCH_THREADS=n to pick the thread count

One step: conv 1->6 (5x5) -> relu -> max-pool 2 -> conv 6->16 (5x5) -> relu -> max-pool 2
-> linear 400->120 -> relu -> linear 120->84 -> relu -> linear 84->10 -> cross-entropy,
backward, and an SGD update (momentum 0.9), on 32x32 single-channel images.  Target
(issue 4): at most 1.5x PyTorch.  Both frameworks are written the same way (functional
ops on their own parameters, their own ``optim.SGD``), timed in interleaved rounds.
Also printed: where LeZero's step spends its time (``lz.TimerHook``).
"""
import os
import sys

THREADS = int(os.environ.get("BENCH_THREADS", os.cpu_count() or 1))
for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ[var] = str(THREADS)

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import interleaved_best_median, report, set_threads  # noqa: E402
from _record import run_main  # noqa: E402

BATCH, LR, TARGET = 64, 0.01, 1.5
SHAPES = [("c1w", (6, 1, 5, 5)), ("c1b", (6,)), ("c2w", (16, 6, 5, 5)), ("c2b", (16,)),
          ("f1w", (120, 400)), ("f1b", (120,)), ("f2w", (84, 120)), ("f2b", (84,)),
          ("f3w", (10, 84)), ("f3b", (10,))]


def make_data(rng):
    weights = {}
    for name, shape in SHAPES:
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else shape[0]
        weights[name] = (rng.uniform(-1, 1, shape) / np.sqrt(fan_in)).astype(np.float32)
    x = rng.standard_normal((BATCH, 1, 32, 32)).astype(np.float32)
    t = rng.integers(0, 10, BATCH)
    return weights, x, t


def lenet(F, p, x):
    """The forward pass, written once for both frameworks' functional APIs."""
    h = F.max_pool2d(F.relu(F.conv2d(x, p["c1w"], p["c1b"])), 2)
    h = F.max_pool2d(F.relu(F.conv2d(h, p["c2w"], p["c2b"])), 2)
    h = h.reshape(h.shape[0], -1)
    h = F.relu(F.linear(h, p["f1w"], p["f1b"]))
    h = F.relu(F.linear(h, p["f2w"], p["f2b"]))
    return F.linear(h, p["f3w"], p["f3b"])


def lezero_step_fn(weights, x, t):
    import lezero as lz
    import lezero.functions as F
    from lezero import optim
    params = {k: lz.Parameter(v.copy()) for k, v in weights.items()}
    opt = optim.SGD(list(params.values()), lr=LR, momentum=0.9)

    def step():
        opt.zero_grad()
        loss = F.cross_entropy(lenet(F, params, x), t)
        loss.backward()
        opt.step()
        return float(loss.data)
    return step


def torch_step_fn(weights, x, t):
    import torch
    import torch.nn.functional as TF
    params = {k: torch.tensor(v.copy(), requires_grad=True) for k, v in weights.items()}
    opt = torch.optim.SGD(list(params.values()), lr=LR, momentum=0.9)
    tx, tt = torch.tensor(x), torch.tensor(t)

    def step():
        opt.zero_grad()
        loss = TF.cross_entropy(lenet(TF, params, tx), tt)
        loss.backward()
        opt.step()
        return loss.item()
    return step


def main():
    set_threads(THREADS)
    weights, x, t = make_data(np.random.default_rng(0))
    lz_step, t_step = lezero_step_fn(weights, x, t), torch_step_fn(weights, x, t)
    # same weights and data: the first losses agree
    l0, t0 = lezero_step_fn(weights, x, t)(), torch_step_fn(weights, x, t)()
    print(f"first-step loss: LeZero {l0:.6f}, PyTorch {t0:.6f}")
    (lz_best, lz_med), (t_best, t_med) = interleaved_best_median([lz_step, t_step], rounds=30, warmup=3)
    print(f"LeNet-5 training step, batch {BATCH}, {THREADS} threads")
    report("LeNet-5 step (best of interleaved rounds)",
           [("LeNet-5 train step b64", lz_best, t_best, TARGET)])
    report("LeNet-5 step (median of interleaved rounds)",
           [("LeNet-5 train step b64", lz_med, t_med, TARGET)])

    import lezero as lz
    with lz.TimerHook() as timer:
        for _ in range(10):
            lz_step()
    print("\nwhere LeZero's step goes (10 steps):")
    timer.print_report()


if __name__ == "__main__":
    run_main(main)
