"""Memory profiler: what the graph keeps for backward, and what is alive overall.

    with lz.memory.profile(model) as prof:          # model optional (per-module figures)
        loss = F.cross_entropy(model(x), t)
        prof.print_saved()                         # what backward will need, now
        loss.backward()
    prof.peak_saved_bytes, prof.peak_activation_bytes, prof.peak_live_bytes
    prof.by_module()                               # {module path: peak activation bytes}

    lz.memory.print_saved_residuals(fn, x)         # like jax.ad_checkpoint.print_saved_residuals

**Saved** bytes are counted exactly: a FunctionHook sees every recorded Function; what a
Function keeps is its inputs' arrays plus the arrays it stores on itself (its ``__dict__``,
up to three levels into lists, tuples and dicts).  Each buffer is counted once however many views
or Functions share it (by the array that owns the memory), and is released when the last
Function holding it is freed.  *Activation* bytes are saved bytes minus the parameters
(leaf Variables that require grad, and autocast's low-precision copies of them).
**Live** bytes are all arrays alive in the process: on NumPy measured with ``tracemalloc``
(NumPy reports its buffers to it), on CuPy sampled from CuPy's memory pool at every
Function call; both are relative to the start.

The memory policy: ``lz.memory.policy`` is ``lezero.runtime.policy`` (printed by
``lezero.runtime.show()``); ``policy.transform_cache_bytes`` bounds what operators keep for
backward that they could recompute (``lezero.runtime.budget``; ``lz.memory.kept_transforms()``
is what they hold now), and ``lz.Config.release_inputs`` lets graphs drop inputs that no
backward reads (``lezero.core.inputref``).  docs/memory.md says what each operator keeps.

Per module (with ``model``): Functions are attributed to the innermost module running when
they are created (and to its ancestors); Functions a checkpointed block recomputes in
backward are attributed to ``checkpoint:<name>`` as well.
"""
import tracemalloc
import weakref
from collections import namedtuple

from lezero import cuda
from lezero.backends import devices_in_use
from lezero.core import FunctionHook, InputRef, Variable, enable_grad
from lezero.utils.files import atomic_write

__all__ = ["profile", "MemoryProfiler", "SavedArray", "saved_residuals",
           "print_saved_residuals", "measure", "plot_memory_vs_depth", "format_bytes",
           "policy", "kept_transforms"]

SavedArray = namedtuple("SavedArray", "op role shape dtype nbytes module parameter")


def format_bytes(n):
    """1536 -> '1.5 KiB'."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


_HELD = Variable.data.__get__      # a Variable's array, without recasting amp's copies


def _root(a):
    while isinstance(getattr(a, "base", None), cuda.array_types()):
        a = a.base
    return a


def _kept_arrays(function):
    """(role, array, the Variable holding it or None) for everything ``function`` holds."""
    out = [(f"input {i}", _HELD(x), x) for i, x in enumerate(function.inputs)
           if type(x) is not InputRef and _HELD(x) is not None]   # else: no array held
    for key, value in vars(function).items():
        if key in ("inputs", "outputs"):
            continue
        if isinstance(value, cuda.array_types()):
            out.append((key, value, None))
        elif isinstance(value, (list, tuple, dict)):
            items = value.values() if isinstance(value, dict) else value
            stack = [(key, v, 1) for v in items]
            while stack:
                k, v, depth = stack.pop()
                if isinstance(v, cuda.array_types()):
                    out.append((k, v, None))
                elif isinstance(v, (list, tuple, dict)) and depth < 3:
                    sub = v.values() if isinstance(v, dict) else v
                    stack.extend((k, s, depth + 1) for s in sub)
    extra = getattr(function, "__saved_arrays__", None)
    if extra is not None:
        out.extend(("kept", a, None) for a in extra())
    return out


def _is_parameter_copy(x):
    """A cast of a leaf (autocast's float16 copy of a parameter) counts as a parameter."""
    f = x.creator
    return type(f).__name__ == "Cast" and f.inputs[0].creator is None \
        and f.inputs[0].requires_grad


class _Live:
    """Peak bytes of all live arrays: tracemalloc (NumPy) and each device's memory pool
    (``Backend.memory_stats()['used_bytes']``, summed over the devices in use)."""

    def __init__(self):
        self.started = not tracemalloc.is_tracing()
        if self.started:
            tracemalloc.start()
        tracemalloc.reset_peak()
        self.base = tracemalloc.get_traced_memory()[0]
        self.devices = [b for b in devices_in_use() if "used_bytes" in b.memory_stats()]
        self.pool_base = self._device_used()
        self.device_peak = 0

    def _device_used(self):
        return sum(b.memory_stats()["used_bytes"] for b in self.devices)

    def sample(self):
        if self.devices:
            self.device_peak = max(self.device_peak, self._device_used() - self.pool_base)

    def host_now(self):
        return tracemalloc.get_traced_memory()[0] - self.base

    def stop(self):
        self.sample()
        self.host_peak = tracemalloc.get_traced_memory()[1] - self.base
        if self.started:
            tracemalloc.stop()


class MemoryProfiler(FunctionHook):
    """A FunctionHook measuring saved and live memory while active (see the module doc)."""

    # Unhashable: the core caches configuration snapshots by (name, value); a hashable
    # hooks tuple would keep the profiler (and the model it holds) alive in that cache.
    __hash__ = None

    def __init__(self, model=None, live=True):
        self.model, self.live = model, live
        self._held = {}             # root id -> [count, nbytes, is_parameter]
        self._records = {}          # function id -> [SavedArray...] (live Functions)
        self._params = set()
        self._stack = [""]
        self._mod_held, self._mod_total, self._mod_peak = {}, {}, {}
        self._saved = self._activations = 0
        self._peak_saved = self._peak_activations = 0
        self._pending = []
        self.peak_live_bytes = self.peak_device_bytes = 0
        self.timeline = []          # (event, saved bytes, activation bytes)
        self._handles = []

    # ----- activation ----------------------------------------------------------------
    def __enter__(self):
        if self.model is not None:
            self._params |= {id(_root(p.data)) for p in self.model.parameters()}
            for name, m in self.model.named_modules():
                self._handles.append(m.register_forward_pre_hook(self._enter_module(name)))
                self._handles.append(m.register_forward_hook(self._leave_module))
        self._live = _Live() if self.live else None
        return super().__enter__()

    # ----- figures (Functions are counted once their inputs are attached) ------------
    @property
    def saved_bytes(self):
        """Bytes the live graph keeps now (parameters included)."""
        self._flush()
        return self._saved

    @property
    def activation_bytes(self):
        """Bytes the live graph keeps now, parameters excluded."""
        self._flush()
        return self._activations

    @property
    def peak_saved_bytes(self):
        self._flush()
        return self._peak_saved

    @property
    def peak_activation_bytes(self):
        self._flush()
        return self._peak_activations

    def __exit__(self, *exc):
        self._flush()
        super().__exit__(*exc)
        for h in self._handles:
            h.remove()
        self._handles = []
        if self._live is not None:
            self._live.stop()
            self.peak_live_bytes = self._live.host_peak
            self.peak_device_bytes = self._live.device_peak
        return False

    def _enter_module(self, name):
        def hook(module, args):
            self._stack.append(name)
        return hook

    def _leave_module(self, module, args, output):
        if len(self._stack) > 1:
            self._stack.pop()

    # ----- hook callbacks ----------------------------------------------------------------
    def transform_inputs(self, function, inputs):
        self._flush()
        return inputs

    def forward_postprocess(self, function, in_data):
        self._flush()
        if any(function.needs_input_grad):      # it will be recorded
            self._pending.append((function, self._modules_now()))
        self._sample("forward " + type(function).__name__)

    def backward_preprocess(self, function, grad_outputs):
        self._flush()
        if type(function).__name__ == "Checkpoint":
            self._stack.append("checkpoint:" + getattr(function.block.fn, "__name__", "block"))

    def backward_postprocess(self, function, grad_outputs):
        self._flush()
        if type(function).__name__ == "Checkpoint" and len(self._stack) > 1:
            self._stack.pop()
        self._sample("backward " + type(function).__name__)

    # ----- bookkeeping -------------------------------------------------------------------
    def _modules_now(self):
        """'' (the whole run), checkpoint labels, then the innermost module's path and
        its ancestors, innermost last."""
        labels = [m for m in self._stack if m.startswith("checkpoint:")]
        mods = [m for m in self._stack if m and not m.startswith("checkpoint:")]
        parts = mods[-1].split(".") if mods else []
        return [""] + labels + [".".join(parts[:i]) for i in range(1, len(parts) + 1)]

    def _flush(self):
        pending, self._pending = self._pending, []
        for function, modules in pending:
            self._record(function, modules)

    def _record(self, function, modules):
        entries, seen = [], set()
        for role, a, holder in _kept_arrays(function):
            if type(holder).__name__ == "ParamCopy":
                continue        # autocast drops it when the region ends (amp.copies)
            root = _root(a)
            rid = id(root)
            if holder is not None and holder.requires_grad and (
                    holder.creator is None or _is_parameter_copy(holder)):
                self._params.add(rid)
            if rid in seen:
                continue
            seen.add(rid)
            is_param = rid in self._params
            entries.append((rid, SavedArray(type(function).__name__, role, tuple(a.shape),
                                            str(a.dtype), int(root.nbytes), modules[-1],
                                            is_param)))
        for rid, info in entries:
            self._add(rid, info.nbytes, info.parameter, modules, +1)
        self._records[id(function)] = entries
        weakref.finalize(function, self._release, id(function),
                         [(rid, info.nbytes, info.parameter) for rid, info in entries], modules)

    def _add(self, rid, nbytes, is_param, modules, sign):
        held = self._held.setdefault(rid, [0, nbytes, is_param])
        held[0] += sign
        if (sign > 0 and held[0] == 1) or (sign < 0 and held[0] == 0):
            self._saved += sign * nbytes
            if not is_param:
                self._activations += sign * nbytes
        if held[0] == 0:
            del self._held[rid]
        self._peak_saved = max(self._peak_saved, self._saved)
        self._peak_activations = max(self._peak_activations, self._activations)
        if is_param:
            return
        for m in modules:
            counts = self._mod_held.setdefault(m, {})
            c = counts.get(rid, 0) + sign
            if c == 0:
                counts.pop(rid, None)
            else:
                counts[rid] = c
            if (sign > 0 and c == 1) or (sign < 0 and c == 0):
                total = self._mod_total.get(m, 0) + sign * nbytes
                self._mod_total[m] = total
                self._mod_peak[m] = max(self._mod_peak.get(m, 0), total)

    def _release(self, fid, entries, modules):
        self._records.pop(fid, None)
        for rid, nbytes, is_param in entries:
            self._add(rid, nbytes, is_param, modules, -1)

    def _sample(self, event):
        self.timeline.append((event, self._saved, self._activations))
        if self._live is not None:
            self._live.sample()

    # ----- reports ---------------------------------------------------------------------
    def saved(self, parameters=False):
        """The arrays the live graph keeps now (each buffer once), largest first."""
        self._flush()
        seen, out = set(), []
        for entries in self._records.values():
            for rid, info in entries:
                if (parameters or not info.parameter) and rid not in seen:
                    seen.add(rid)
                    out.append(info)
        return sorted(out, key=lambda s: -s.nbytes)

    def print_saved(self, parameters=False, limit=30, file=None):
        """Print ``saved()``: dtype[shape], the operator that keeps it, its module."""
        rows = self.saved(parameters)
        for s in rows[:limit]:
            where = f"  ({s.module})" if s.module else ""
            print(f"{s.dtype}{list(s.shape)!s:<22} {s.role} of {s.op}{where}  "
                  f"{format_bytes(s.nbytes)}", file=file)
        if len(rows) > limit:
            print(f"... and {len(rows) - limit} more", file=file)
        print(f"total saved now: {format_bytes(self.activation_bytes)} of activations, "
              f"{format_bytes(self.saved_bytes)} with parameters", file=file)

    def by_module(self):
        """{module path: peak activation bytes held by Functions it created}."""
        return dict(sorted(self._mod_peak.items(), key=lambda kv: -kv[1]))

    def summary(self):
        return {"peak_saved_bytes": self.peak_saved_bytes,
                "peak_activation_bytes": self.peak_activation_bytes,
                "peak_live_bytes": self.peak_live_bytes,
                "peak_device_bytes": self.peak_device_bytes}

    def __repr__(self):
        return ("MemoryProfiler(" + ", ".join(f"{k}={format_bytes(v)}"
                                              for k, v in self.summary().items()) + ")")


def profile(model=None, live=True):
    """A ``MemoryProfiler`` to use as ``with lz.memory.profile(model) as prof:``."""
    return MemoryProfiler(model, live)


def saved_residuals(fn, *args, **kwargs):
    """Run ``fn(*args, **kwargs)`` recording the graph; return what it keeps for backward
    (a list of ``SavedArray``), parameters excluded."""
    with enable_grad(), MemoryProfiler(live=False) as prof:
        out = fn(*args, **kwargs)
        rows = prof.saved()
    del out
    return rows


def print_saved_residuals(fn, *args, file=None, **kwargs):
    """Print what ``fn(*args)`` keeps for backward, one buffer a line (jax's
    print_saved_residuals)."""
    with enable_grad(), MemoryProfiler(live=False) as prof:
        out = fn(*args, **kwargs)
        prof.print_saved(file=file)
    del out


def kept_transforms():
    """Bytes that operators keep now for backward though they could recompute them (the
    convolutions' transforms), all graphs together; at most ``policy.transform_cache_bytes``."""
    from lezero.runtime import budget          # a higher floor: reached when asked
    return budget.in_use()


def __getattr__(name):
    """``lz.memory.policy``: the runtime's policy (a higher floor, imported when asked)."""
    if name == "policy":
        from lezero.runtime import policy
        return policy
    raise AttributeError(f"module 'lezero.memory' has no attribute {name!r}")


def measure(fn, *args, model=None):
    """Forward ``loss = fn(*args)`` and backward under a profiler; returns its summary."""
    with MemoryProfiler(model) as prof:
        loss = fn(*args)
        if not isinstance(loss, Variable):
            raise TypeError("memory.measure: fn must return a Variable (the loss), got "
                            f"{type(loss).__name__}")
        loss.backward()
        del loss
    return prof.summary()


def plot_memory_vs_depth(depths, series, path, title="Peak saved memory against depth",
                         ylabel="peak saved activations (MiB)"):
    """Plot ``series`` ({label: [bytes at each depth]}) against ``depths``; PNG to ``path``."""
    import io

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 4))
    for label, values in series.items():
        ax.plot(depths, [v / 2 ** 20 for v in values], marker="o", label=label)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlabel("depth (layers)")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    plt.close(fig)
    return atomic_write(path, buf.getvalue(), where="plot_memory_vs_depth")
