"""Gradient checkpointing measured as a user measures it: tracemalloc bytes and step time.

    python benchmarks/bench_checkpoint.py --depths 16 64 256 --plot depth.png   # all parts
    python benchmarks/bench_checkpoint.py --part sweep        # or: mlp-time, gpt2
    python benchmarks/bench_checkpoint.py --quick             # smoke sizes, a minute

Memory of one training step, the memory benchmark's method (benchmarks/bench_memory.py):
LeZero through ``_mem_measure.lezero_step``: ``kept`` is tracemalloc's current memory once
``loss = forward()`` returns minus before (model, batch and a warm step already there, the
gradients None), ``peak`` tracemalloc's peak over forward and backward (the new parameter
gradients included).  PyTorch's allocator is not Python's, so tracemalloc cannot see it: its
two figures come from its own allocator (``torch.profiler.profile(profile_memory=True)``:
the running sum of its CPU allocations and frees when forward returns, and its peak over
the step), which counts everything checkpointing keeps whatever its mechanism.

* sweep: an MLP of depth x (Linear(256, 256) + ReLU), batch 1024 (one activation 1 MiB),
  loss mean(y**2), one Linear shared by every layer (the parameters and their gradients
  then do not grow with depth, so what grows is the activations); plain and
  ``lz.checkpoint_sequential(layers, "sqrt")`` beside torch's ``checkpoint_sequential``
  with as many segments (non-reentrant; torch leaves its last segment unchecked).  The
  fitted exponent is the least-squares slope of log(memory) on log(depth): 1 for O(n),
  0.5 for O(sqrt n).
* mlp-time: 64 distinct Linear(1024, 1024) + ReLU, batch 256, plain and checkpointed.
* gpt2: GPT-2 small (``lezero.nn.models`` gpt2, 124M, batch 2, seq 128, the memory
  benchmark's workload, PyTorch's ``GPT2LMHeadModel`` with the same weights): plain, each
  transformer block checkpointed (``lz.checkpoint(block.forward)``; HF's
  ``activation_checkpointing_enable()``), and ``checkpoint_sequential`` over the blocks
  in "sqrt" (3) segments.  ``blocks`` is what ``lz.memory.profile(model).by_module()``
  counts for ``transformer.h`` after forward.

Step time: ``interleaved_times`` (warm-up out), the best of the rounds and, as the ratio,
the median over rounds of a step divided by the plain step of the same round.  Targets
(issue 34): memory O(sqrt n), a checkpointed step at most 1.35x the plain one.
"""
import argparse
import math
import os
import sys
import weakref
from collections import namedtuple

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import interleaved_times, set_threads  # noqa: E402
from _record import run_main  # noqa: E402

MiB = 2 ** 20
TIME_TARGET = 1.35
BACKWARD_MARK = "bench_checkpoint:backward"


# ----- PyTorch's saved tensors (bench_memory.py and bench_amp.py count with these) -------

class TorchSaved:
    """Bytes of the storages autograd saves, each once (``now`` and ``peak``); parameters
    (and autocast's copies of them) excluded."""

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


# ----- one step, either framework ----------------------------------------------------------

def train_step(loss_fn, params):
    """One training step: forward, backward, the gradients dropped (as a fresh step has
    none).  ``p.grad = None`` works for LeZero's and PyTorch's parameters alike."""
    def step():
        loss_fn().backward()
        for p in params:
            p.grad = None
    return step


def lezero_memory(loss_fn, params):
    """{"kept", "peak", "lz", ...} bytes of one LeZero step, the memory benchmark's way."""
    from _mem_measure import lezero_step      # it imports this module: import it late
    from _mem_workloads import Case
    return lezero_step(Case(None, list(params), lambda dtype: loss_fn()), None)


def torch_memory(loss_fn, params):
    """{"kept", "peak"} bytes of one PyTorch step, from PyTorch's CPU allocator."""
    import torch
    train_step(loss_fn, params)()                 # warm: first-call allocations out
    cpu = [torch.profiler.ProfilerActivity.CPU]
    with torch.profiler.profile(activities=cpu, profile_memory=True) as prof:
        loss = loss_fn()
        with torch.profiler.record_function(BACKWARD_MARK):
            loss.backward()
        del loss
    for p in params:
        p.grad = None
    return allocator_figures(prof.profiler.kineto_results.events())


def allocator_figures(events):
    """{"kept", "peak"}: the running sum of the profiler's memory events when the
    ``BACKWARD_MARK`` range starts, and its maximum."""
    from torch.autograd.profiler import MEMORY_EVENT_NAME
    mark = min(e.start_ns() for e in events if e.name() == BACKWARD_MARK)
    memory = sorted((e for e in events if e.name() == MEMORY_EVENT_NAME),
                    key=lambda e: e.start_ns())
    now = kept = peak = 0
    for e in memory:
        now += e.nbytes()
        peak = max(peak, now)
        if e.start_ns() < mark:
            kept = now
    return {"kept": kept, "peak": peak}


def unique(params):
    return list({id(p): p for p in params}.values())


# ----- the MLP -----------------------------------------------------------------------------

def lezero_mlp(depth, width, batch, shared):
    """(layers, input, parameters): depth x (Linear(width, width) + ReLU)."""
    import lezero as lz
    from lezero import nn
    lz.manual_seed(0)
    one = nn.Linear(width, width)
    layers = []
    for _ in range(depth):
        layers += [one if shared else nn.Linear(width, width), nn.ReLU()]
    x = lz.Variable(np.random.default_rng(0).standard_normal((batch, width), np.float32),
                    requires_grad=False)
    return layers, x, unique(p for m in layers for p in m.parameters())


def lezero_mlp_loss(layers, x, checkpointed):
    import lezero as lz
    run = lz.checkpoint_sequential(layers, "sqrt") if checkpointed else None

    def loss():
        h = x
        if run is not None:
            h = run(h)
        else:
            for m in layers:
                h = m(h)
        return (h * h).mean()
    return loss


def torch_mlp(depth, width, batch, shared):
    import torch
    torch.manual_seed(0)
    one = torch.nn.Linear(width, width)
    layers = []
    for _ in range(depth):
        layers += [one if shared else torch.nn.Linear(width, width), torch.nn.ReLU()]
    x = torch.from_numpy(np.random.default_rng(0).standard_normal((batch, width), np.float32))
    model = torch.nn.Sequential(*layers)
    return model, x, list(model.parameters())


def torch_mlp_loss(model, x, checkpointed):
    from torch.utils.checkpoint import checkpoint_sequential
    segments = max(1, round(math.sqrt(len(model))))       # as LeZero's "sqrt"

    def loss():
        if checkpointed:
            y = checkpoint_sequential(model, segments, x, use_reentrant=False)
        else:
            y = model(x)
        return (y * y).mean()
    return loss


SWEEP_KEYS = (("LeZero", False), ("LeZero", True), ("torch", False), ("torch", True))


def mlp_memory(depth, width, batch):
    """{(framework, checkpointed): {"kept", "peak", ...}} for the shared-weight MLP."""
    layers, x, params = lezero_mlp(depth, width, batch, shared=True)
    out = {("LeZero", c): lezero_memory(lezero_mlp_loss(layers, x, c), params)
           for c in (False, True)}
    model, xt, tparams = torch_mlp(depth, width, batch, shared=True)
    out.update({("torch", c): torch_memory(torch_mlp_loss(model, xt, c), tparams)
                for c in (False, True)})
    return out


def fitted_exponent(depths, values):
    """The least-squares slope of log(values) on log(depths)."""
    return float(np.polyfit(np.log(depths), np.log(values), 1)[0])


def sweep_table(depths, width, batch):
    """Kept and peak MiB at each depth, plain and "sqrt", both frameworks, and the fitted
    exponents; returns {depth: mlp_memory(...)}."""
    print(f"\n== MLP depth sweep: one training step (Linear({width}, {width}) + ReLU per layer, "
          f"one Linear shared, batch {batch}; one activation = {width * batch * 4 / MiB:.2f} "
          "MiB); LeZero: tracemalloc, PyTorch: its allocator")
    results = {d: mlp_memory(d, width, batch) for d in depths}
    for figure in ("kept", "peak"):
        what = "kept after forward" if figure == "kept" else "peak of the step"
        print(f"\n{what:<20}{'LeZero plain':>14}{'sqrt':>11}{'ratio':>7}"
              f"{'torch plain':>13}{'sqrt':>11}{'ratio':>7}{'LeZero/torch sqrt':>19}")
        for d in depths:
            lp, lc, tp, tc = (results[d][k][figure] for k in SWEEP_KEYS)
            print(f"{'depth ' + str(d):<20}{lp / MiB:>10.1f} MiB{lc / MiB:>7.1f} MiB"
                  f"{lc / lp:>7.3f}{tp / MiB:>9.1f} MiB{tc / MiB:>7.1f} MiB{tc / tp:>7.3f}"
                  f"{lc / tc:>19.2f}")
        if len(depths) > 1:
            slopes = [fitted_exponent(depths, [results[d][k][figure] for d in depths])
                      for k in SWEEP_KEYS]
            print(f"{'fitted exponent':<20}{slopes[0]:>14.2f}{slopes[1]:>11.2f}{'':>7}"
                  f"{slopes[2]:>13.2f}{slopes[3]:>11.2f}")
    return results


def plot_sweep(results, path):
    import lezero as lz
    depths = sorted(results)
    series = {f"{fw} {'sqrt' if c else 'plain'}, {figure}":
              [results[d][fw, c][figure] for d in depths]
              for fw, c in SWEEP_KEYS for figure in ("kept", "peak") if c or figure == "kept"}
    lz.memory.plot_memory_vs_depth(depths, series, path,
                                   title="MLP: kept after forward and step peak against depth",
                                   ylabel="MiB (LeZero: tracemalloc; torch: its allocator)")
    print(f"plot: {path}")


# ----- step time ---------------------------------------------------------------------------

def time_table(title, modes, lezero_fns, torch_fns, rounds, block):
    """Interleaved step times of each mode in both frameworks, the first mode the plain
    step the ratios divide by: ``best`` the ratio of the best times, ``rounds`` the median
    over rounds of a step / the plain step of the same round.  A target holds when both
    ratios do.  Returns {(framework, mode): (best ratio, rounds ratio)}."""
    n = len(modes)
    times = np.array(interleaved_times(lezero_fns + torch_fns, rounds=rounds, warmup=1,
                                       block=block, pause=0.01))
    per_round = np.concatenate([times[:n] / times[0], times[n:] / times[n]])
    best = times.min(axis=1)
    ratios = [(best[i] / best[0 if i < n else n], float(np.median(per_round[i])))
              for i in range(2 * n)]
    print(f"\n== {title}: step time (best of {rounds} interleaved rounds of {block} steps; "
          "ratio to the plain step: of the best times / median over rounds)")
    print(f"{'checkpoint':<20}{'LeZero':>10}{'ratio':>13}{'target':>12}"
          f"{'PyTorch':>10}{'ratio':>13}{'LeZero/PyTorch':>16}")
    for i, mode in enumerate(modes):
        target = ""
        if i:
            ok = max(ratios[i]) <= TIME_TARGET
            target = f"<={TIME_TARGET:g} {'ok' if ok else 'MISS'}"
        print(f"{mode:<20}{best[i]:>8.3f} s{_pair(ratios[i]):>13}{target:>12}"
              f"{best[n + i]:>8.3f} s{_pair(ratios[n + i]):>13}{best[i] / best[n + i]:>16.2f}")
    return {(fw, m): ratios[k * n + i] for k, fw in enumerate(("LeZero", "torch"))
            for i, m in enumerate(modes)}


def _pair(r):
    return f"{r[0]:.2f} / {r[1]:.2f}"


def mlp_time(depth, width, batch, rounds):
    layers, x, params = lezero_mlp(depth, width, batch, shared=False)
    model, xt, tparams = torch_mlp(depth, width, batch, shared=False)
    modes = ["none", "sqrt segments"]
    return time_table(f"MLP, {depth} distinct Linear({width}, {width}) + ReLU, batch {batch}",
                      modes, [train_step(lezero_mlp_loss(layers, x, c), params)
                              for c in (False, True)],
                      [train_step(torch_mlp_loss(model, xt, c), tparams)
                       for c in (False, True)], rounds, block=3)


# ----- GPT-2 small -------------------------------------------------------------------------

GPT2_MODES = ("none", "each block", "sqrt segments")


def lezero_gpt2_modes(model):
    """``use(mode)`` switches ``model`` (LeZero's GPT2LMHeadModel) between the modes."""
    import lezero as lz
    from lezero import nn
    body, blocks = model.transformer, model.transformer.h
    wrapped = [lz.checkpoint(b.forward) for b in blocks]
    run = lz.checkpoint_sequential(list(blocks), "sqrt")

    class Segments(nn.Module):
        """All the blocks as one: the bias and cache GPT2Model passes are None here."""

        def __init__(self):
            super().__init__()
            self.blocks = blocks

        def forward(self, x, bias=None, cache=None):
            assert bias is None and cache is None, "no attention mask or cache here"
            return run(x)
    segments = nn.ModuleList([Segments()])

    def use(mode):
        body.h = segments if mode == "sqrt segments" else blocks
        for b, w in zip(blocks, wrapped):
            if mode == "each block":
                b.forward = w
            else:
                vars(b).pop("forward", None)
    use.segments = len(run.segments)
    return use


def torch_gpt2_modes(model, segments):
    """``use(mode)`` for HF's GPT2LMHeadModel: HF's own checkpointing for "each block";
    torch's ``checkpoint_sequential`` over the blocks in ``segments`` for "sqrt"."""
    import torch
    from torch.utils.checkpoint import checkpoint_sequential
    body, blocks = model.transformer, model.transformer.h

    class Segments(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = blocks

        def forward(self, x, *args, **kwargs):
            fns = [lambda h, b=b: b(h, *args, **kwargs) for b in self.blocks]
            return checkpoint_sequential(fns, segments, x, use_reentrant=False)
    wrapped = torch.nn.ModuleList([Segments()])

    def use(mode):
        body.h = wrapped if mode == "sqrt segments" else blocks
        if mode == "each block" and not model.is_activation_checkpointing:
            model.activation_checkpointing_enable()
        elif mode != "each block" and model.is_activation_checkpointing:
            model.activation_checkpointing_disable()
            model.disable_input_require_grads()
    return use


GPT2 = namedtuple("GPT2", "lezero_losses params model torch_losses torch_params batch seq "
                         "segments")


def gpt2_setup(quick):
    """A ``GPT2``: each framework's loss function per mode (same weights, same batch)."""
    import torch
    from _mem_workloads import build_pair, token_batch, transformer_config
    theirs, ours = build_pair("gpt2", quick)
    batch, seq, _ = transformer_config("gpt2", quick)
    ids = token_batch(batch, seq, ours.model.config.vocab_size)
    tids = torch.from_numpy(ids)
    lz_use = lezero_gpt2_modes(ours.model)
    t_use = torch_gpt2_modes(theirs.model, lz_use.segments)

    def lezero_loss(mode):
        def loss():
            lz_use(mode)
            return ours.model.loss(ids)
        return loss

    def torch_loss(mode):
        def loss():
            t_use(mode)
            return theirs.model(input_ids=tids, labels=tids, use_cache=False).loss
        return loss
    return GPT2([lezero_loss(m) for m in GPT2_MODES], unique(ours.params), ours.model,
                [torch_loss(m) for m in GPT2_MODES], unique(theirs.params), batch, seq,
                lz_use.segments)


def blocks_kept(loss_fn, model):
    """What ``lz.memory.profile(model)`` counts for the blocks once forward returns."""
    import lezero as lz
    with lz.memory.profile(model, live=False) as prof:
        loss = loss_fn()
        kept = prof.by_module().get("transformer.h", 0)
        del loss
    return kept


def gpt2_memory(setup):
    params, k = setup.params, setup.segments
    count = sum(p.data.size for p in params)
    print(f"\n== GPT-2 small ({count / 1e6:.1f}M parameters, batch {setup.batch}, seq "
          f"{setup.seq}): one training step; its parameter gradients "
          f"({count * 4 / MiB:.1f} MiB) are part of each peak")
    print(f"{'checkpoint':<20}{'LeZero kept':>13}{'blocks':>11}{'peak':>11}{'kept x':>8}"
          f"{'peak x':>8}{'torch kept':>13}{'peak':>11}{'kept x':>8}{'peak x':>8}"
          f"{'LeZero/torch kept':>19}{'peak':>6}")
    rows = {}
    for mode, lz_loss, t_loss in zip(GPT2_MODES, setup.lezero_losses, setup.torch_losses):
        ours = lezero_memory(lz_loss, params)
        ours["blocks"] = blocks_kept(lz_loss, setup.model)
        rows[mode] = ours, torch_memory(t_loss, setup.torch_params)
    base, tbase = rows["none"]
    for mode, (ours, theirs) in rows.items():
        name = f"sqrt segments ({k})" if mode == "sqrt segments" else mode
        print(f"{name:<20}{ours['kept'] / MiB:>9.1f} MiB{ours['blocks'] / MiB:>7.1f} MiB"
              f"{ours['peak'] / MiB:>7.1f} MiB{ours['kept'] / base['kept']:>8.2f}"
              f"{ours['peak'] / base['peak']:>8.2f}{theirs['kept'] / MiB:>9.1f} MiB"
              f"{theirs['peak'] / MiB:>7.1f} MiB{theirs['kept'] / tbase['kept']:>8.2f}"
              f"{theirs['peak'] / tbase['peak']:>8.2f}{ours['kept'] / theirs['kept']:>19.2f}"
              f"{ours['peak'] / theirs['peak']:>6.2f}")
    return rows


def gpt2_time(setup, rounds):
    modes = [f"{m} ({setup.segments})" if m == "sqrt segments" else m for m in GPT2_MODES]
    return time_table("GPT-2 small", modes,
                      [train_step(f, setup.params) for f in setup.lezero_losses],
                      [train_step(f, setup.torch_params) for f in setup.torch_losses],
                      rounds, block=1)


# ----- main --------------------------------------------------------------------------------

def threads():
    """``set_threads``, and with one thread LeZero's own split kernels (its paired
    backward GEMMs, parallel elementwise parts) on one thread too, so that
    ``BENCH_CLOCK=cpu`` (this thread's CPU time) counts all of LeZero's work."""
    import lezero as lz
    n = set_threads()
    if n == 1:
        lz.Config.conv_threads = 1
    return n


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--part", choices=["all", "sweep", "mlp-time", "gpt2"], default="all")
    p.add_argument("--depths", type=int, nargs="+", default=[16, 64, 256])
    p.add_argument("--width", type=int, default=256, help="of the depth sweep's MLP")
    p.add_argument("--batch", type=int, default=1024, help="of the depth sweep's MLP")
    p.add_argument("--time-depth", type=int, default=64)
    p.add_argument("--rounds", type=int, default=5, help="timing rounds of the MLP")
    p.add_argument("--gpt2-rounds", type=int, default=5)
    p.add_argument("--plot", default=None, help="write the depth sweep's plot here")
    p.add_argument("--quick", action="store_true", help="smoke sizes")
    args = p.parse_args(argv)
    if args.quick:
        args.depths, args.width, args.batch, args.time_depth = [4, 16], 64, 64, 8
        args.rounds, args.gpt2_rounds = 2, 1
    print(f"threads: {threads()}")
    if args.part in ("all", "sweep"):
        results = sweep_table(args.depths, args.width, args.batch)
        if args.plot:
            plot_sweep(results, args.plot)
    if args.part in ("all", "mlp-time"):
        width, batch = (128, 64) if args.quick else (1024, 256)
        mlp_time(args.time_depth, width, batch, args.rounds)
    if args.part in ("all", "gpt2"):
        setup = gpt2_setup(args.quick)
        gpt2_memory(setup)
        gpt2_time(setup, args.gpt2_rounds)


if __name__ == "__main__":
    run_main(main)
