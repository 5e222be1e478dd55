"""Gradient checkpointing: saved-activation memory and step time, LeZero and PyTorch.

    python benchmarks/bench_checkpoint.py                       # 64 layers: memory + time
    python benchmarks/bench_checkpoint.py --depths 16 64 256 --plot depth.png
    python benchmarks/bench_checkpoint.py --width 256 --batch 64 --rounds 2   # quick

An MLP of ``depth`` x (Linear(width, width) + ReLU), batch ``batch``, loss = mean(y**2).
Targets (issue 11): with ``checkpoint_sequential(segments="sqrt")`` the peak saved
activation memory is at most 0.25x of the plain run at 64 layers, it grows as sqrt(depth),
and a step costs at most 1.4x the plain one.

Memory is *saved activations*: what the graph keeps for backward, parameters excluded, at
its peak over forward and backward (the recomputation of a segment included).  LeZero:
``lz.memory.profile``.  PyTorch: ``torch.autograd.graph.saved_tensors_hooks`` counting each
saved storage once while it is alive; torch's reentrant checkpoint is measured (its
recomputation saves through the same hooks; the non-reentrant one hides them in its own
hooks), and torch leaves the last segment unchecked.  The depth sweep shares one Linear
between all layers (activations do not depend on the weights, and 256 distinct 1024x1024
layers would need 2 GiB of weights and gradients); the timed runs use distinct layers.
"""
import argparse
import math
import os
import sys
import weakref

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import interleaved_times, set_threads  # noqa: E402
from _record import run_main  # noqa: E402


def lezero_model(depth, width, shared):
    import lezero as lz
    from lezero import nn
    lz.manual_seed(0)
    one = nn.Linear(width, width)
    layers = []
    for _ in range(depth):
        layers += [one if shared else nn.Linear(width, width), nn.ReLU()]
    return layers


def lezero_step(layers, x, checkpointed):
    import lezero as lz
    run = lz.checkpoint_sequential(layers, "sqrt") if checkpointed else None

    def step():
        h = x
        if run is not None:
            h = run(h)
        else:
            for m in layers:
                h = m(h)
        (h * h).mean().backward()
    return step


def lezero_memory(depth, width, batch, checkpointed):
    import lezero as lz
    layers = lezero_model(depth, width, shared=True)
    x = lz.Variable(np.random.default_rng(0).standard_normal((batch, width), np.float32),
                    requires_grad=False)
    with lz.memory.profile(live=False) as prof:
        lezero_step(layers, x, checkpointed)()
    return prof.peak_activation_bytes


class TorchSaved:
    """Peak bytes of the storages autograd saves, each once; parameters (and autocast's
    copies of them) excluded."""

    def __init__(self, params):
        self.params = {p.data_ptr() for p in params}
        self.live, self.now, self.peak = {}, 0, 0

    def pack(self, t):
        if t.data_ptr() in self.params or self._param_copy(t):
            return t
        holder = _Holder(t)
        key = t.untyped_storage().data_ptr()
        entry = self.live.setdefault(key, [0, t.untyped_storage().nbytes()])
        entry[0] += 1
        if entry[0] == 1:
            self.now += entry[1]
            self.peak = max(self.peak, self.now)
        weakref.finalize(holder, self._release, key)
        return holder

    def _param_copy(self, t):
        """autocast's low-precision copy of a parameter (a cast whose input is a leaf)."""
        fn = t.grad_fn
        if fn is None or type(fn).__name__ != "ToCopyBackward0":
            return False
        leaf = fn.next_functions[0][0]
        return hasattr(leaf, "variable") and leaf.variable.data_ptr() in self.params

    def _release(self, key):
        entry = self.live[key]
        entry[0] -= 1
        if entry[0] == 0:
            self.now -= entry[1]
            del self.live[key]

    @staticmethod
    def unpack(h):
        return h.t if isinstance(h, _Holder) else h


class _Holder:
    def __init__(self, t):
        self.t = t


def torch_model(depth, width, shared):
    import torch
    torch.manual_seed(0)
    one = torch.nn.Linear(width, width)
    layers = []
    for _ in range(depth):
        layers += [one if shared else torch.nn.Linear(width, width), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers)


def torch_step(model, x, checkpointed, reentrant=False):
    import torch
    from torch.utils.checkpoint import checkpoint_sequential
    segments = max(1, round(math.sqrt(len(model))))

    def step():
        if checkpointed:
            y = checkpoint_sequential(model, segments, x, use_reentrant=reentrant)
        else:
            y = model(x)
        (y * y).mean().backward()
    return step


def torch_memory(depth, width, batch, checkpointed):
    import torch
    model = torch_model(depth, width, shared=True)
    x = torch.randn(batch, width, requires_grad=True)
    acct = TorchSaved(model.parameters())
    with torch.autograd.graph.saved_tensors_hooks(acct.pack, acct.unpack):
        torch_step(model, x, checkpointed, reentrant=True)()
    return acct.peak


def memory_table(depths, width, batch):
    act = width * batch * 4
    rows = []
    print(f"\n== saved activations, peak (width {width}, batch {batch}; one activation = "
          f"{act / 2 ** 20:.2f} MiB)")
    print(f"{'depth':>6}{'LeZero plain':>14}{'LeZero sqrt':>13}{'ratio':>7}"
          f"{'torch plain':>13}{'torch sqrt':>12}{'ratio':>7}{'sqrt/sqrt(d)':>14}")
    for d in depths:
        lp, lc = lezero_memory(d, width, batch, False), lezero_memory(d, width, batch, True)
        tp, tc = torch_memory(d, width, batch, False), torch_memory(d, width, batch, True)
        rows.append((d, lp, lc, tp, tc))
        print(f"{d:>6}{lp / 2 ** 20:>11.1f} MiB{lc / 2 ** 20:>9.1f} MiB{lc / lp:>7.3f}"
              f"{tp / 2 ** 20:>10.1f} MiB{tc / 2 ** 20:>8.1f} MiB{tc / tp:>7.3f}"
              f"{lc / act / math.sqrt(d):>14.2f}")
    return rows


def time_table(depth, width, batch, rounds):
    import lezero as lz
    import torch
    layers = lezero_model(depth, width, shared=False)
    x = lz.Variable(np.random.default_rng(0).standard_normal((batch, width), np.float32),
                    requires_grad=False)
    model = torch_model(depth, width, shared=False)
    xt = torch.randn(batch, width)
    fns = [lezero_step(layers, x, False), lezero_step(layers, x, True),
           torch_step(model, xt, False), torch_step(model, xt, True)]
    times = interleaved_times(fns, rounds=rounds, warmup=1)
    best = [min(t) for t in times]
    print(f"\n== step time, forward + backward ({depth} layers, best of {rounds} "
          f"alternating rounds)")
    print(f"LeZero: plain {best[0]:.2f} s, checkpointed {best[1]:.2f} s: "
          f"{best[1] / best[0]:.2f}x (target <= 1.4)")
    print(f"torch:  plain {best[2]:.2f} s, checkpointed {best[3]:.2f} s: "
          f"{best[3] / best[2]:.2f}x")
    print(f"LeZero / torch: plain {best[0] / best[2]:.2f}, checkpointed "
          f"{best[1] / best[3]:.2f}")
    return best


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--depths", type=int, nargs="+", default=[64])
    p.add_argument("--width", type=int, default=1024)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--time-depth", type=int, default=64, help="0 skips the timing")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--plot", default=None, help="write the memory-vs-depth plot here")
    args = p.parse_args(argv)
    print(f"threads: {set_threads()}")
    rows = memory_table(args.depths, args.width, args.batch)
    if args.plot:
        import lezero as lz
        series = {"LeZero plain": [r[1] for r in rows], "LeZero sqrt": [r[2] for r in rows],
                  "torch plain": [r[3] for r in rows], "torch sqrt": [r[4] for r in rows]}
        lz.memory.plot_memory_vs_depth([r[0] for r in rows], series, args.plot)
        print(f"plot: {args.plot}")
    if args.time_depth:
        time_table(args.time_depth, args.width, args.batch, args.rounds)


if __name__ == "__main__":
    run_main(main)
