"""``nn.LSTM`` layer training step, LeZero vs PyTorch CPU: one layer, input and hidden
256, sequence 35, batch 20 (the classic word-language-model shape), same weights, same
thread count, one process.

    python benchmarks/bench_lstm_layer.py        # BENCH_THREADS=n picks the thread count

One step = the layer's forward over the sequence from a zero state, a mean-squared loss
on the outputs and the final (h, c), backward, and an SGD update through the optimizer
(what a training loop pays, module and optimizer overheads included; the operator alone
is measured by ``bench_lstm.py``).  Target (issue 5): at most 1.5x PyTorch's fused
``nn.LSTM``.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import report, set_threads  # noqa: E402
from _record import run_main  # noqa: E402
from _common import interleaved_best, limit_threads  # noqa: E402

SEQ, BATCH, INPUT, HIDDEN = 35, 20, 256, 256


def lezero_step_fn(x):
    import lezero as lz
    import lezero.functions as F
    from lezero import nn, optim
    lz.manual_seed(0)
    lstm = nn.LSTM(INPUT, HIDDEN)
    opt = optim.SGD(lstm.parameters(), lr=0.01)

    def step():
        out, (h, c) = lstm(x)
        loss = F.mean(out * out) + F.mean(h * h) + F.mean(c * c)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()
    return lstm, step


def torch_step_fn(state_dict, x):
    import torch
    lstm = torch.nn.LSTM(INPUT, HIDDEN)
    lstm.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in state_dict.items()})
    opt = torch.optim.SGD(lstm.parameters(), lr=0.01)
    xt = torch.from_numpy(x)

    def step():
        out, (h, c) = lstm(xt)
        loss = (out * out).mean() + (h * h).mean() + (c * c).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()
    return step


def numpy_matmuls_fn(x):
    """The step's GEMMs alone: the input projection for all steps at once, one recurrent
    product per step forward, and their transposes backward."""
    rng = np.random.default_rng(0)
    w_ih = rng.standard_normal((4 * HIDDEN, INPUT), np.float32)
    w_hh = rng.standard_normal((4 * HIDDEN, HIDDEN), np.float32)
    h = rng.standard_normal((BATCH, HIDDEN), np.float32)
    g = rng.standard_normal((BATCH, 4 * HIDDEN), np.float32)
    flat = x.reshape(SEQ * BATCH, INPUT)
    g_all = rng.standard_normal((SEQ * BATCH, 4 * HIDDEN), np.float32)

    def step():
        flat @ w_ih.T
        for _ in range(SEQ):
            h @ w_hh.T            # forward recurrence
            g @ w_hh              # backward: gradient to h
        g_all @ w_ih              # gradient to the input
        g_all.T @ flat            # gradient to w_ih
        g_all.T @ g_all[:, :HIDDEN]   # gradient to w_hh (one batched product)
    return step


def main():
    threads = set_threads()
    limit_threads(threads)
    x = np.random.default_rng(0).standard_normal((SEQ, BATCH, INPUT)).astype(np.float32)
    lstm, ours = lezero_step_fn(x)
    theirs = torch_step_fn(lstm.state_dict(), x)
    first_ours, first_theirs = ours(), theirs()
    assert abs(first_ours - first_theirs) < 1e-4 * abs(first_theirs), \
        f"the two layers differ: losses {first_ours} and {first_theirs}"
    t_ours, t_theirs, t_mm = interleaved_best([ours, theirs, numpy_matmuls_fn(x)], rounds=15)
    report(f"nn.LSTM training step (1 layer, input {INPUT}, hidden {HIDDEN}, sequence {SEQ}, "
           f"batch {BATCH}, SGD; {threads} threads)",
           [("LeZero nn.LSTM vs PyTorch nn.LSTM", t_ours, t_theirs, 1.5),
            ("NumPy matmuls alone vs PyTorch", t_mm, t_theirs, None)])
    print(f"first-step losses: LeZero {first_ours:.6f}, PyTorch {first_theirs:.6f}")


if __name__ == "__main__":
    run_main(main)
