"""Static-graph replay against eager execution: MLP inference at batch 1 and 64, LeNet-5
at batch 8, ResNet-18 at batch 2 (32 x 32 images) and GPT-mini forward (2 blocks, d_model
128, 4 x 64 tokens), with the fusion pass on and off; PyTorch eager and
``torch.jit.trace`` on the same models and weights.

    python benchmarks/bench_jit.py          # BENCH_THREADS=n, BENCH_ROUNDS=n
    python benchmarks/bench_jit.py --record # also docs/figures/bench_jit.md and its blocks

All runs are inference (no graph recorded: ``lz.no_grad()`` / ``torch.no_grad()``), in
alternating rounds in one process; the best time of each is printed with the ratio to
LeZero eager and to PyTorch eager.
"""
import os
import sys


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _record import run_main  # noqa: E402
from _jit_models import (CASES, best_row, check_same, lezero_case, start, timed,  # noqa: E402
                         torch_twin)


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

    return {"LeZero eager": timed(lz.no_grad, model, *xs),
            "replay": timed(lz.no_grad, plain, *xs),
            "replay+fusion": timed(lz.no_grad, fused, *xs),
            "torch eager": timed(torch.no_grad, twin, *txs),
            "torch.jit.trace": timed(torch.no_grad, traced, *txs)}, fused


def main():
    header = ["LeZero eager", "replay", "replay+fusion", "torch eager", "torch.jit.trace"]
    ratios = [("LeZero eager", "replay"), ("replay", "replay+fusion"),
              ("replay+fusion", "torch eager")]
    _, rounds = start(header, ["eager/replay", "plain/fused", "fused/torch"])
    for name in CASES:
        fns, fused = contenders(name)
        best_row(name, fns, rounds, header, ratios)
        print(f"{'':<12}fusion: {fused.graph.meta.get('fused_groups', 0)} groups, "
              f"{len(fused.raw_graph.nodes)} -> {len(fused.graph.nodes)} nodes")


if __name__ == "__main__":
    run_main(main)
