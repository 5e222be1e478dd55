"""Static-graph replay against eager execution: MLP inference at batch 1 and 64, LeNet-5
at batch 8 and GPT-mini forward (2 blocks, d_model 128, 4 x 64 tokens), with the fusion
pass on and off; PyTorch eager and ``torch.jit.trace`` on the same models and weights.

    python benchmarks/bench_jit.py          # BENCH_THREADS=n, BENCH_ROUNDS=n

All runs are inference (no graph recorded: ``lz.no_grad()`` / ``torch.no_grad()``), in
alternating rounds in one process; the best time of each is printed with the ratio to
LeZero eager and to PyTorch eager.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import _fmt, interleaved_times, limit_threads, set_threads  # noqa: E402
from _jit_models import CASES, check_same, lezero_case, torch_twin  # noqa: E402


def contenders(name):
    """{label: zero-argument function} for one case, outputs checked equal first."""
    import torch
    import lezero as lz
    from lezero import jit
    model, xs = lezero_case(name)
    plain = jit.trace(model, *xs, fuse=False)
    fused = jit.trace(model, *xs, fuse=True)
    twin = torch_twin(name, model.state_dict())
    txs = [torch.from_numpy(x) for x in xs]
    with torch.no_grad():
        traced = torch.jit.trace(twin, tuple(txs))
        ref = twin(*txs).numpy()
    with lz.no_grad():
        for label, fn in (("eager", model), ("replay", plain), ("fused", fused)):
            check_same(fn(*xs).data, ref, f"{name} {label}")

    def under(ctx, fn, *args):
        def run():
            with ctx():
                fn(*args)
        return run
    return {"LeZero eager": under(lz.no_grad, model, *xs),
            "replay": under(lz.no_grad, plain, *xs),
            "replay+fusion": under(lz.no_grad, fused, *xs),
            "torch eager": under(torch.no_grad, twin, *txs),
            "torch.jit.trace": under(torch.no_grad, traced, *txs)}, fused


def main():
    threads = set_threads()
    limit_threads(threads)
    rounds = int(os.environ.get("BENCH_ROUNDS", 30))
    print(f"threads: {threads}; best of {rounds} alternating rounds; inference")
    header = ["LeZero eager", "replay", "replay+fusion", "torch eager", "torch.jit.trace"]
    print(f"\n{'case':<10}" + "".join(f"{h:>17}" for h in header)
          + f"{'eager/replay':>14}{'fused/torch':>13}")
    for name in CASES:
        fns, fused = contenders(name)
        times = dict(zip(fns, (min(t) for t in interleaved_times(list(fns.values()),
                                                                 rounds=rounds))))
        cells = "".join(f"{_fmt(times[h]):>17}" for h in header)
        print(f"{name:<10}{cells}{times['LeZero eager'] / times['replay']:>14.2f}"
              f"{times['replay+fusion'] / times['torch eager']:>13.2f}")
        print(f"{'':<10}fusion: {fused.graph.meta.get('fused_groups', 0)} groups, "
              f"{len(fused.raw_graph.nodes)} -> {len(fused.graph.nodes)} nodes")


if __name__ == "__main__":
    main()
