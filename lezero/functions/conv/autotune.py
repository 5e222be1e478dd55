"""Autotuning: measure the candidate algorithms on this machine.

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
from lezero.core import register_setting
from lezero.functions.conv.parallel import run_product
from lezero.functions.conv.registry import ALGORITHMS, candidates
from lezero.utils.files import atomic_write

register_setting("conv_autotune", False)

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
    from lezero.backends import get
    return np if prob.backend == "numpy" else get(prob.backend).xp


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
        from lezero.backends import get
        get(prob.backend).synchronize()


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
        if entry is not None and entry.get("algo") in ALGORITHMS:
            return entry["algo"]
        ops = make_operands(prob)
        inputs = operands(ops, op)
        times = {}
        for a in candidates(prob, names):
            cache = warm_cache(a, prob, op, ops) if a.name == prefer else None
            times[a.name] = measure(a, prob, op, inputs, cache=cache)
        best = min(times, key=times.get)
        _save({key: {"algo": best, "ms": {n: round(t * 1e3, 4) for n, t in times.items()},
                     "x_shape": list(prob.x_shape), "w_shape": list(prob.w_shape),
                     "tuned_at": datetime.datetime.now().isoformat(timespec="seconds")}})
        return best
