"""Per-operation framework overhead: a one-element add, and an inference layer (conv,
batch norm, ReLU6) on a tiny input, LeZero vs PyTorch, one process.

    python benchmarks/bench_overhead.py

Targets (issue 22): forward <= 2.0x PyTorch; forward+backward <= 0.35x PyTorch (PyTorch's
backward() call is heavy).  Each pair is timed in warm alternating rounds
(``_common.round_ratios``): the ratio is the median of the per-round ratios, the times
the median per call.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import round_ratios, set_threads  # noqa: E402
from _record import run_main  # noqa: E402

# The targets of issue 22, as ratios LeZero / PyTorch (printed beside each result).
TARGET_FORWARD, TARGET_FORWARD_BACKWARD = 2.0, 0.35


def main():
    import torch

    import lezero as lz
    set_threads()
    n = 2000

    a, b = lz.Variable(np.ones(1, np.float32)), lz.Variable(np.ones(1, np.float32))
    ta = torch.ones(1, requires_grad=True)
    tb = torch.ones(1, requires_grad=True)

    def lz_fwd():
        for _ in range(n):
            a + b

    def t_fwd():
        for _ in range(n):
            ta + tb

    def lz_fb():
        for _ in range(n):
            y = a + b
            y.backward()

    def t_fb():
        for _ in range(n):
            y = ta + tb
            y.backward()

    def lz_nograd():
        with lz.no_grad():
            for _ in range(n):
                a + b

    def t_nograd():
        with torch.no_grad():
            for _ in range(n):
                ta + tb

    # grad() of one node and a two-node backward take the engine's general path (the
    # one-Function path serves a plain .backward() only): measured so that a change
    # there shows up here.
    def lz_grad():
        for _ in range(n):
            lz.grad(a * b, [a])

    def t_grad():
        for _ in range(n):
            torch.autograd.grad(ta * tb, [ta])

    def lz_two():
        for _ in range(n):
            (a * b + a).backward()

    def t_two():
        for _ in range(n):
            (ta * tb + ta).backward()

    print("\n== one-element add: per-call time, warm alternating rounds")
    print(f"{'case':<34}{'LeZero':>10}{'PyTorch':>10}{'ratio':>8}{'target':>8}")
    for name, ours, theirs, target in [
            ("add forward (graph recorded)", lz_fwd, t_fwd, TARGET_FORWARD),
            ("add forward+backward", lz_fb, t_fb, TARGET_FORWARD_BACKWARD),
            ("add forward, no_grad", lz_nograd, t_nograd, None),
            ("mul + grad() of one node", lz_grad, t_grad, None),
            ("mul, add + backward (two nodes)", lz_two, t_two, None)]:
        (ratio, _), (t_ours, t_theirs) = round_ratios([ours, theirs], rounds=9, block=3)
        tgt = "" if target is None else f"<={target:g}"
        print(f"{name:<34}{t_ours / n * 1e6:>7.2f} us{t_theirs / n * 1e6:>7.2f} us"
              f"{ratio:>8.2f}{tgt:>8}")


def conv_layer_rows(n=300):
    """The fixed cost of an inference layer: Conv2d + BatchNorm2d + ReLU6 in eval mode
    without gradients, on a (1, 8, 4, 4) input whose product costs almost nothing.
    LeZero runs it fused (``lezero.nn.inference_fusion``): its product directly, or
    through the ``Conv`` Function (what a function hook, here a no-op one, makes it
    take), or unfused (three modules, as PyTorch runs them)."""
    import torch

    import lezero as lz
    from lezero import nn
    from lezero.core.hooks import FunctionHook
    from lezero.nn import inference_fusion

    x = np.random.default_rng(0).standard_normal((1, 8, 4, 4)).astype(np.float32)
    ours = nn.Sequential(nn.Conv2d(8, 8, 1), nn.BatchNorm2d(8), nn.ReLU6()).eval()
    theirs = torch.nn.Sequential(torch.nn.Conv2d(8, 8, 1), torch.nn.BatchNorm2d(8),
                                 torch.nn.ReLU6()).eval()
    tx = torch.from_numpy(x)

    def layer(hooks=(), fused=True):
        def run():
            with lz.no_grad(), lz.using_config("function_hooks", hooks):
                if not fused:
                    with inference_fusion.disabled():
                        for _ in range(n):
                            inference_fusion.sequential(ours, x)
                    return
                for _ in range(n):
                    inference_fusion.sequential(ours, x)
        return run

    def t_layer():
        with torch.no_grad():
            for _ in range(n):
                theirs(tx)

    print("\n== an eval Conv2d + BatchNorm2d + ReLU6 on a (1, 8, 4, 4) input, no_grad")
    print(f"{'case':<34}{'LeZero':>10}{'PyTorch':>10}{'ratio':>8}")
    for name, fn in [("fused, product run directly", layer()),
                     ("fused, through the Function", layer((FunctionHook(),))),
                     ("unfused (three modules)", layer(fused=False))]:
        (ratio, _), (t_ours, t_theirs) = round_ratios([fn, t_layer], rounds=9, block=3)
        print(f"{name:<34}{t_ours / n * 1e6:>7.1f} us{t_theirs / n * 1e6:>7.1f} us"
              f"{ratio:>8.2f}")


if __name__ == "__main__":
    run_main(lambda: (main(), conv_layer_rows()))
