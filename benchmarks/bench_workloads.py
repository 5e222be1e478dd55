"""The six speed workloads of issue 22, LeZero against PyTorch CPU, same weights, same
thread count (2 by default), in warm alternating rounds; the run repeats and prints the
range of each ratio over its repeats.

    python benchmarks/bench_workloads.py               # 3 runs, all workloads
    python benchmarks/bench_workloads.py lenet lstm    # only workloads whose name has a word
    python benchmarks/bench_workloads.py --busy        # the same with one core kept busy
    python benchmarks/bench_workloads.py --record      # also write docs/performance.md's table
    BENCH_RUNS=5 BENCH_THREADS=2 python benchmarks/bench_workloads.py

``--busy`` runs the table while another process spins on one core (``busy.py``), as a
user's machine always has something else running: both frameworks meet the same load.
``--record`` saves the whole table, all workloads, as the figures block
``workloads_quiet`` (``workloads_busy`` with ``--busy``) of docs/performance.md
(``tools/doc_figures.py``).

A round times a short block of warm steps of each side (its fastest step counts), the
order alternating from round to round; a run's ratio is the median of its per-round
ratios.  The NumPy floor is the step's GEMMs alone on the same shapes, timed in the same
rounds (what no framework written on NumPy can beat).

The environment is the user's: the benchmark sets no variable (the thread count goes
through threadpoolctl, ``torch.set_num_threads`` and Numba, all cores by default;
``BENCH_THREADS`` picks another).  NumPy's OpenBLAS threads would spin ~0.1 s after each
threaded product and take a core from whatever runs next; ``import lezero`` makes them
sleep soon (``lezero.runtime.openblas``).  PyTorch's OpenMP threads spin about 10 ms,
which the 10 ms pause before each block covers.
"""
import datetime
import os
import sys

import numpy as np

THREADS = int(os.environ.get("BENCH_THREADS", os.cpu_count() or 1))

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import ratio_range, round_ratios, set_threads  # noqa: E402

ADD_CALLS = 2000        # one-element adds per timed step (a single add is below the clock)


def lenet():
    import bench_lenet as b
    weights, x, t = b.make_data(np.random.default_rng(0))
    return b.lezero_step_fn(weights, x, t), b.torch_step_fn(weights, x, t), lenet_floor(x)


def lenet_floor(x):
    """LeNet-5's GEMMs alone: each conv as one im2col product, each linear layer, and the
    two backward products of each (gradients to the input and to the weight)."""
    rng = np.random.default_rng(0)
    n = x.shape[0]
    shapes = [(n * 28 * 28, 25, 6), (n * 10 * 10, 150, 16), (n, 400, 120), (n, 120, 84),
              (n, 84, 10)]
    mats = [(rng.standard_normal((m, k), np.float32), rng.standard_normal((k, o), np.float32),
             rng.standard_normal((m, o), np.float32)) for m, k, o in shapes]

    def step():
        for a, w, g in mats:
            a @ w
            g @ w.T
            a.T @ g
    return step


def lstm():
    import bench_lstm_layer as b
    x = np.random.default_rng(0).standard_normal((b.SEQ, b.BATCH, b.INPUT)).astype(np.float32)
    layer, ours = b.lezero_step_fn(x)
    return ours, b.torch_step_fn(layer.state_dict(), x), b.numpy_matmuls_fn(x)


def mlp():
    import bench_mlp as b
    rng = np.random.default_rng(0)
    weights = b.make_weights(rng)
    x = rng.standard_normal((b.BATCH, b.SIZES[0])).astype(np.float32)
    t = rng.integers(0, b.SIZES[-1], b.BATCH).astype(np.int64)
    return (b.lezero_step_fn(weights, x, t), b.torch_step_fn(weights, x, t),
            b.numpy_matmuls_fn(weights, x))


def gpt():
    import bench_gpt_mini as b
    rng = np.random.default_rng(0)
    idx = rng.integers(0, b.VOCAB, (b.BATCH, b.BLOCK))
    targets = rng.integers(0, b.VOCAB, (b.BATCH, b.BLOCK))
    model, ours = b.lezero_step_fn(idx, targets)
    return ours, b.torch_step_fn(model.state_dict(), idx, targets), b.numpy_matmuls_fn()


def conv():
    import bench_conv as b
    rng = np.random.default_rng(0)
    x = rng.standard_normal((32, 64, 32, 32)).astype(np.float32)
    w = (rng.standard_normal((64, 64, 3, 3)) / np.sqrt(64 * 9)).astype(np.float32)
    gy = rng.standard_normal((32, 64, 32, 32)).astype(np.float32)
    return b.lezero_step(x, w, gy, 1), b.torch_step(x, w, gy, 1), None


def _add_pair(backward):
    import torch

    import lezero as lz
    a, b = lz.Variable(np.ones(1, np.float32)), lz.Variable(np.ones(1, np.float32))
    ta, tb = torch.ones(1, requires_grad=True), torch.ones(1, requires_grad=True)

    def ours():
        for _ in range(ADD_CALLS):
            y = a + b
            if backward:
                y.backward()

    def theirs():
        for _ in range(ADD_CALLS):
            y = ta + tb
            if backward:
                y.backward()
    return ours, theirs, None


# (name, builder, rounds, block, must, aim)
WORKLOADS = [
    ("LeNet-5 b64 train step", lenet, 11, 4, 1.2, 1.0),
    ("nn.LSTM h256 s35 b20 fwd+bwd", lstm, 7, 3, 1.2, 1.0),
    ("MLP 784-1000-1000-10 b100 step", mlp, 7, 3, 1.0, 0.8),
    ("GPT-mini 2L d128 s64 b16 step", gpt, 7, 2, 1.0, 0.8),
    ("conv3x3 64->64 32x32 b32 fwd+bwd", conv, 7, 2, 0.85, 0.7),
    ("one-element add forward", lambda: _add_pair(False), 11, 3, 2.0, 1.5),
    ("one-element add forward+backward", lambda: _add_pair(True), 11, 3, 0.35, 0.25),
]


def measure(builder, rounds, block):
    """One run of one workload: [LeZero / PyTorch, NumPy floor / PyTorch or None]."""
    ours, theirs, floor = builder()
    fns = [ours, theirs] + ([floor] if floor else [])
    ratios, _ = round_ratios(fns, rounds=rounds, warmup=3, block=block)
    return [ratios[0], ratios[2] if floor else float("nan")]


def main(words, runs):
    """Print the table of the workloads whose name has one of ``words`` (all: none);
    returns its lines."""
    set_threads(THREADS)
    chosen = [w for w in WORKLOADS if not words or any(s in w[0].lower() for s in words)]
    lines = [f"LeZero time / PyTorch time, {THREADS} threads each, median of warm alternating "
             f"rounds; range over {runs} runs",
             f"{'workload':<34}{'runs':>20}{'range':>13}{'must':>7}{'aim':>6}  "
             f"{'NumPy floor':>11}"]
    print(*lines, sep="\n")
    for name, builder, rounds, block, must, aim in chosen:
        (ours, floor), results = ratio_range(lambda: measure(builder, rounds, block), runs)
        each = " ".join(f"{r[0]:.2f}" for r in results)
        mark = "ok" if ours[1] <= must else "MISS"
        fl = "-" if np.isnan(floor[0]) else f"{floor[0]:.2f}-{floor[1]:.2f}"
        lines.append(f"{name:<34}{each:>20}{ours[0]:>7.2f}-{ours[1]:.2f}{must:>7g}{aim:>6g}  "
                     f"{fl:>11} {mark}")
        print(lines[-1], flush=True)
    return lines


def record(name, command, lines):
    """Save the table as docs/performance.md's figures block ``name``."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))), "tools"))
    from doc_figures import record as save
    head = (f"`{command}` ({datetime.date.today().isoformat()}, {os.cpu_count()} cores, "
            f"no environment variable set)")
    for problem in save(name, "\n".join([head, "", "```"] + lines + ["```"])):
        print(problem)


def run(args):
    """The command line: words choose workloads; ``--busy``, ``--record [NAME]`` as
    above."""
    busy_run, name = "--busy" in args, None
    if "--record" in args:
        i = args.index("--record")
        named = i + 1 < len(args) and not args[i + 1].startswith("-")
        name = args[i + 1] if named else "workloads_busy" if busy_run else "workloads_quiet"
        args = args[:i] + args[i + 1 + named:]
    recording = name is not None
    words = [w for w in args if w != "--busy"]
    if recording and words:
        raise SystemExit("bench_workloads: --record saves the whole table; drop the words "
                         f"{words}")
    runs = int(os.environ.get("BENCH_RUNS", 3))
    if busy_run:
        from busy import busy
        with busy(1):
            print("one core kept busy by another process (benchmarks/busy.py)")
            lines = main(words, runs)
    else:
        lines = main(words, runs)
    if recording:
        command = "python benchmarks/bench_workloads.py" + (" --busy" if busy_run else "")
        record(name, command, lines)


if __name__ == "__main__":
    run([w.lower() for w in sys.argv[1:]])
