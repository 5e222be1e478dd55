"""Autotuning and ``conv_explain``: measure the candidate algorithms on this machine.

With ``lz.Config.conv_autotune = True`` (or ``lz.using_config("conv_autotune", True)``),
``algo="auto"`` times every candidate once per *shape bucket* and remembers the fastest in
a human-readable JSON file, so the next step, the next run and similar shapes reuse it.

The file is ``$LEZERO_CONV_CACHE`` if set, else ``$LEZERO_CACHE_DIR/conv_autotune.json``,
else ``~/.cache/lezero/conv_autotune.json``.  Writes are atomic (temp file + rename) and
merge with what other processes wrote meanwhile.

Buckets: batch and spatial sizes are rounded up to the next value of the form 2^k or
3 * 2^k (half octaves), so batch 50 and 64 share a bucket but 28x28 and 32x32 images
tune separately from 14x14; channels, kernel, stride, padding, dilation, groups, dtype,
backend and the product (forward / grad_input / grad_weight) are exact.
"""
import datetime
import json
import os
import threading
import time
import warnings

import numpy as np

from lezero import cuda
from lezero.core import get_config
from lezero.functions.conv import select
from lezero.functions.conv.parallel import run_product
from lezero.utils.files import atomic_write

ENV_FILE = "LEZERO_CONV_CACHE"
ENV_DIR = "LEZERO_CACHE_DIR"
VERSION = 1

_lock = threading.Lock()
_memory = {"path": None, "entries": {}}


def cache_path():
    """Where tuned choices are stored (see the module docstring)."""
    path = os.environ.get(ENV_FILE)
    if path:
        return path
    root = os.environ.get(ENV_DIR) or os.path.join(os.path.expanduser("~"), ".cache", "lezero")
    return os.path.join(root, "conv_autotune.json")


def bucket(n):
    """Round up to the next 2^k or 3 * 2^k (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, ...)."""
    b = 1
    while b < n:
        if b < 2:
            b += 1
        elif b & (b - 1) == 0:      # a power of two: go up half an octave
            b = b * 3 // 2
        else:                       # 3 * 2^k: on to the next power of two
            b = b * 4 // 3
    return b


def bucket_key(prob, op, names=None):
    """The cache key of a problem: readable, and equal for problems in the same bucket."""
    g = prob.geom
    spatial = "x".join(str(bucket(s)) for s in g.in_size)
    key = (f"{op} {prob.backend} {prob.dtype} N{bucket(prob.batch)} "
           f"C{prob.in_channels}->{prob.out_channels} in{spatial} {g.describe()}")
    return key if names is None else key + " among " + "/".join(names)


def _read(path):
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        return dict(data.get("entries", {})) if data.get("version") == VERSION else {}
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as e:
        warnings.warn(f"conv autotune: ignoring unreadable cache {path} ({e})")
        return {}


def _entries():
    path = cache_path()
    if _memory["path"] != path:
        _memory.update(path=path, entries=_read(path))
    return _memory["entries"]


def _save(new):
    """Merge ``new`` entries into the file atomically (keeps other processes' entries)."""
    path = cache_path()
    try:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        merged = _read(path)
        merged.update(new)
        text = json.dumps({"version": VERSION, "entries": merged}, indent=1, sort_keys=True)
        atomic_write(path, text, where="conv autotune")
        _memory["entries"].update(merged)
    except OSError as e:            # a read-only home must not stop training
        warnings.warn(f"conv autotune: could not write {path} ({e})")


def clear_memory():
    """Forget the in-memory copy (the file is re-read on next use)."""
    _memory.update(path=None, entries={})


# ----- measuring ---------------------------------------------------------------------------

def _xp(prob):
    return np if prob.backend == "numpy" else cuda._import_cupy()


def make_inputs(prob, op, seed=0, dtype=None):
    """Random operands of one product: (x, w), (gy, w) or (x, gy)."""
    ops = make_operands(prob, seed, dtype)
    return operands(ops, op)


def make_operands(prob, seed=0, dtype=None):
    """Random ``x``, ``w`` and ``gy`` of the problem's shapes, as a dict."""
    xp = _xp(prob)
    rng = np.random.default_rng(seed)
    dtype = dtype or prob.dtype

    def r(shape):
        return xp.asarray(rng.standard_normal(shape).astype(dtype))
    return {"x": r(prob.x_shape), "w": r(prob.w_shape), "gy": r(prob.y_shape)}


def operands(ops, op):
    """The two operands ``op`` takes from the dict of ``make_operands``."""
    names = {"forward": ("x", "w"), "grad_input": ("gy", "w"), "grad_weight": ("x", "gy")}[op]
    return ops[names[0]], ops[names[1]]


def warm_cache(algo, prob, op, ops):
    """The cache ``algo``'s own forward pass (and grad_input, before grad_weight) leaves
    for ``op``: what a backward after a forward with the same algorithm finds."""
    cache = {"keep_input": True}
    run_product(algo, "forward", ops["x"], ops["w"], prob, cache)
    if op == "grad_weight":
        run_product(algo, "grad_input", ops["gy"], ops["w"], prob, cache)
    return cache


def _sync(prob):
    if prob.backend != "numpy":
        _xp(prob).cuda.Device().synchronize()


def measure(algo, prob, op, inputs=None, repeat=3, cache=None):
    """Best-of-``repeat`` seconds of one product (after one untimed warm-up run, which also
    triggers any Numba compilation).  ``cache``: a warm cache (see ``warm_cache``)."""
    a, b = inputs if inputs is not None else make_inputs(prob, op)
    cache = {} if cache is None else cache
    run_product(algo, op, a, b, prob, cache)
    _sync(prob)
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        run_product(algo, op, a, b, prob, cache)
        _sync(prob)
        best = min(best, time.perf_counter() - t0)
    return best


def tuned(prob, op, names=None, prefer=None):
    """The fastest algorithm's name for ``prob``'s bucket, measuring it the first time.
    ``prefer`` (the forward pass's algorithm) is timed with the cache its forward left."""
    prefer = prefer if op != "forward" else None
    key = bucket_key(prob, op, names) + (f" after {prefer}" if prefer else "")
    with _lock:
        entry = _entries().get(key)
        if entry is not None and entry.get("algo") in select.ALGORITHMS:
            return entry["algo"]
        ops = make_operands(prob)
        inputs = operands(ops, op)
        times = {}
        for a in select.candidates(prob, names):
            cache = warm_cache(a, prob, op, ops) if a.name == prefer else None
            times[a.name] = measure(a, prob, op, inputs, cache=cache)
        best = min(times, key=times.get)
        _save({key: {"algo": best, "ms": {n: round(t * 1e3, 4) for n, t in times.items()},
                     "x_shape": list(prob.x_shape), "w_shape": list(prob.w_shape),
                     "tuned_at": datetime.datetime.now().isoformat(timespec="seconds")}})
        return best


# ----- explaining --------------------------------------------------------------------------

class Explanation:
    """What ``conv_explain`` found: ``rows`` (one dict per algorithm), ``chosen``, ``reason``."""

    def __init__(self, prob, op, rows, chosen, reason):
        self.prob, self.op, self.rows, self.chosen, self.reason = prob, op, rows, chosen, reason

    def __getitem__(self, name):
        return next(r for r in self.rows if r["algo"] == name)

    def __str__(self):
        p = self.prob
        lines = [f"conv {self.op}: x {p.x_shape}, w {p.w_shape}, {p.geom.describe()}, "
                 f"{p.dtype}, {p.backend}; {p.flops() / 1e9:.3f} GFLOP direct",
                 f"{'algorithm':<14}{'predicted ms':>13}{'measured ms':>13}{'workspace MB':>14}"
                 f"{'rel. error':>12}  note"]
        for r in self.rows:
            if r["unsupported"]:
                lines.append(f"{r['algo']:<14}{'-':>13}{'-':>13}{'-':>14}{'-':>12}  "
                             f"{r['unsupported']}")
                continue
            meas = "-" if r["measured_ms"] is None else f"{r['measured_ms']:.3f}"
            err = "-" if r["rel_error"] is None else f"{r['rel_error']:.1e}"
            mark = "  <- chosen" if r["algo"] == self.chosen else ""
            lines.append(f"{r['algo']:<14}{r['predicted_ms']:>13.3f}{meas:>13}"
                         f"{r['workspace_bytes'] / 2 ** 20:>14.2f}{err:>12}{mark}")
        lines.append(f"chosen: {self.chosen} ({self.reason})")
        return "\n".join(lines)

    __repr__ = __str__


def explain(prob, op="forward", measure_time=True, repeat=3, after=None):
    """Predict, measure and check every algorithm on ``prob``; see ``F.conv_explain``."""
    after = after if op != "forward" else None
    ops = make_operands(prob)
    inputs = operands(ops, op)
    ref_inputs = [cuda.as_numpy(a).astype(np.float64) for a in inputs]
    ref_prob = type(prob)(prob.geom, prob.batch, prob.in_channels, prob.out_channels,
                          "float64", "numpy")
    reference = select.ALGORITHMS["im2col"].run(op, *ref_inputs, ref_prob, {})
    scale = float(np.abs(reference).max()) or 1.0
    rows = []
    for name, algo in select.ALGORITHMS.items():
        why = algo.unsupported(prob)
        row = {"algo": name, "unsupported": why, "predicted_ms": None, "measured_ms": None,
               "workspace_bytes": None, "max_abs_error": None, "rel_error": None}
        if why is None:
            reuse = name == after
            cache = warm_cache(algo, prob, op, ops) if reuse else {}
            out = cuda.as_numpy(run_product(algo, op, *inputs, prob, cache)).astype(np.float64)
            err = float(np.abs(out - reference).max())
            row.update(predicted_ms=select.predicted_seconds(algo, prob, op, reuse) * 1e3,
                       workspace_bytes=algo.workspace_bytes(prob, op),
                       max_abs_error=err, rel_error=err / scale)
            if measure_time:
                row["measured_ms"] = measure(algo, prob, op, inputs, repeat, cache) * 1e3
        rows.append(row)
    ok = [r for r in rows if r["unsupported"] is None]
    if get_config().conv_autotune and measure_time:
        chosen = min(ok, key=lambda r: r["measured_ms"])["algo"]
        reason = "fastest measured; Config.conv_autotune is on"
    else:
        chosen = select.by_model(prob, op, prefer=after).name
        reason = "lowest predicted time; the cost model decides while Config.conv_autotune is off"
    if after:
        reason += f"; {after} is timed reusing what its forward pass cached"
    if len(ok) == 1:
        reason = "the only algorithm that handles this geometry"
    return Explanation(prob, op, rows, chosen, reason)
