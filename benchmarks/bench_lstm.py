"""LSTM training step (1 layer, input 256, hidden 256, sequence 35, batch 20): LeZero's
fused ``F.lstm`` vs PyTorch's fused ``nn.LSTM``, same weights, same thread count.

    python benchmarks/bench_lstm.py            # BENCH_THREADS=n to pick the thread count

One step = forward over the sequence, a squared-error loss on every output and on
(h_n, c_n), backward, and a plain SGD update of the four weights.  Target (issue 5):
at most 1.5x PyTorch.  Also timed: the same step with packed variable-length input
(lengths 35 down to 5), and the cell-by-cell LSTM built from ``lstm_cell`` (what a
framework without a fused layer pays).
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import best_time, interleaved_best, report, set_threads  # noqa: E402
from _record import run_main  # noqa: E402

SEQ, BATCH, INPUT, HIDDEN = 35, 20, 256, 256
LR = 0.01


def make_data(rng):
    bound = 1 / np.sqrt(HIDDEN)
    weights = [rng.uniform(-bound, bound, s).astype(np.float32) for s in
               [(4 * HIDDEN, INPUT), (4 * HIDDEN, HIDDEN), (4 * HIDDEN,), (4 * HIDDEN,)]]
    x = rng.standard_normal((SEQ, BATCH, INPUT)).astype(np.float32)
    lengths = np.linspace(SEQ, 5, BATCH).astype(np.int64)
    return weights, x, lengths


def lezero_step_fn(weights, x, lengths=None, cells=False):
    import lezero as lz
    import lezero.functions as F
    params = [lz.Parameter(w.copy()) for w in weights]

    def forward():
        if cells:
            h = c = None
            outs = []
            for t in range(SEQ):
                h, c = F.lstm_cell(x[t], (h, c), *params)
                outs.append((h * h).sum())
            return sum(outs) + (c * c).sum()
        inp = x if lengths is None else F.pack_padded_sequence(x, lengths)
        y, (h, c) = F.lstm(inp, None, params)
        y = y if lengths is None else y.data
        return (y * y).sum() + (h * h).sum() + (c * c).sum()

    def step():
        loss = forward()
        for p in params:
            p.cleargrad()
        loss.backward()
        for p in params:
            p.data -= LR * p.grad.data
    return step


def torch_step_fn(weights, x, lengths=None):
    import torch
    lstm = torch.nn.LSTM(INPUT, HIDDEN)
    with torch.no_grad():
        for p, w in zip(lstm.parameters(), weights):
            p.copy_(torch.from_numpy(w))
    xt = torch.from_numpy(x)
    lt = None if lengths is None else torch.from_numpy(lengths)

    def step():
        inp = xt if lt is None else torch.nn.utils.rnn.pack_padded_sequence(xt, lt)
        y, (h, c) = lstm(inp)
        y = y if lt is None else y.data
        loss = (y * y).sum() + (h * h).sum() + (c * c).sum()
        lstm.zero_grad()
        loss.backward()
        with torch.no_grad():
            for p in lstm.parameters():
                p -= LR * p.grad
    return step


def main():
    threads = set_threads()
    from threadpoolctl import threadpool_limits
    threadpool_limits(threads)          # NumPy's BLAS gets the same thread count as torch
    rng = np.random.default_rng(0)
    weights, x, lengths = make_data(rng)
    ours, theirs = interleaved_best([lezero_step_fn(weights, x), torch_step_fn(weights, x)],
                                    rounds=15)
    ours_p, theirs_p = interleaved_best([lezero_step_fn(weights, x, lengths),
                                         torch_step_fn(weights, x, lengths)], rounds=15)
    cells = best_time(lezero_step_fn(weights, x, cells=True), repeat=5)
    rows = [("fused LSTM step (padded)", ours, theirs, 1.5),
            ("fused LSTM step (packed)", ours_p, theirs_p, 1.5),
            ("lstm_cell loop vs torch fused", cells, theirs, None)]
    report(f"LSTM training step: seq {SEQ}, batch {BATCH}, {INPUT}->{HIDDEN}, "
           f"{threads} thread(s)", rows)


if __name__ == "__main__":
    run_main(main)
