"""Batch-parallel execution: split the batch into parts and run each part on its own thread.

A convolution product is independent per sample (the weight gradient is a sum over
samples), so ``run_product`` cuts the batch into one part per thread, runs the chosen
algorithm on each part with single-threaded BLAS and serial Numba kernels, and joins the
parts.  That is one fork and one join per product, where threading inside each GEMM and
each kernel would synchronise ~100 times per layer: on a shared, oversubscribed machine
every synchronisation waits for a time slice, and the BLAS and Numba thread pools spin
against each other.

The thread count is ``lz.Config.conv_threads`` (0: ``NUMBA_NUM_THREADS``, else
``OMP_NUM_THREADS``, else the CPU count).  Splitting needs ``threadpoolctl`` (to hold BLAS
to one thread inside the parts); without it, or for small problems, a single batch-wide
call runs instead and the kernels and BLAS use their own threads.
"""
import concurrent.futures
import contextvars
import dataclasses
import os
import threading

from lezero import cuda
from lezero.core import get_config, register_setting
from lezero.kernels.conv_launch import serial_kernels

register_setting("conv_threads", 0)

# A part below this many flops (~0.1 ms of work) is not worth a thread (fork + join ~50 us).
MIN_PART_FLOPS = 4e6

# Which operand of each product is batched, by role: views of the same array are shared
# between products (forward and grad_weight both cut x) so per-part caches keep working.
ROLES = {"forward": ("x", None), "grad_input": ("gy", None), "grad_weight": ("x", "gy")}

_lock = threading.Lock()
_pool = {"executor": None, "workers": 0, "pid": None, "blas": None}


def threads():
    """The number of threads a convolution may use."""
    n = get_config().conv_threads
    if n:
        return int(n)
    env = os.environ.get("NUMBA_NUM_THREADS") or os.environ.get("OMP_NUM_THREADS")
    return int(env) if env else (os.cpu_count() or 1)


def _blas():
    """A threadpoolctl controller (None when threadpoolctl is not installed)."""
    if _pool["blas"] is None:
        try:
            import threadpoolctl
            _pool["blas"] = threadpoolctl.ThreadpoolController()
        except Exception:            # not installed, or it cannot inspect this process
            _pool["blas"] = False
    return _pool["blas"] or None


def parts_for(prob):
    """How many batch parts to run ``prob`` in (1: no split)."""
    if prob.backend != "numpy" or prob.batch < 2:
        return 1
    n = min(threads(), prob.batch, int(prob.flops() // MIN_PART_FLOPS))
    if n < 2 or _blas() is None:
        return 1
    return n


def split(batch, parts):
    """``parts`` contiguous (start, stop) ranges covering ``range(batch)``."""
    edges = [batch * i // parts for i in range(parts + 1)]
    return list(zip(edges[:-1], edges[1:]))


def _executor(workers):
    """The worker pool (made anew after a fork: a child inherits no running threads)."""
    with _lock:
        forked = _pool["pid"] != os.getpid()
        if forked or _pool["workers"] < workers:
            if _pool["executor"] is not None and not forked:
                _pool["executor"].shutdown(wait=False)
            _pool["executor"] = concurrent.futures.ThreadPoolExecutor(
                max_workers=workers, thread_name_prefix="lezero-conv")
            _pool["workers"] = workers
            _pool["pid"] = os.getpid()
        return _pool["executor"]


def _serially(fn, i):
    with serial_kernels():
        return fn(i)


def run_parts(fn, count):
    """``[fn(0), ..., fn(count - 1)]`` with part 0 on this thread and the others on the
    pool, BLAS held to one thread and the Numba kernels serial in each."""
    ex = _executor(count - 1)
    with _blas().limit(limits=1, user_api="blas"):
        # each task gets a copy of this thread's settings (use_numba, ...)
        futures = [ex.submit(contextvars.copy_context().run, _serially, fn, i)
                   for i in range(1, count)]
        try:
            first = _serially(fn, 0)
        finally:
            concurrent.futures.wait(futures)
        return [first] + [f.result() for f in futures]


def _views(cache, role, array, bounds):
    """``array[lo:hi]`` for each part: the same view objects every time for one array."""
    key = ("views", role) if role == "x" else ("bwd:views", role)
    entry = cache.get(key)
    if entry is None or entry[0] is not array or entry[1] != bounds:
        entry = cache[key] = (array, bounds, [array[lo:hi] for lo, hi in bounds])
    return entry[2]


def _part_cache(cache, i, parts):
    sub = cache.get(("part", i, parts))
    if sub is None:
        sub = cache[("part", i, parts)] = {"keep_input": cache.get("keep_input", False)}
    return sub


def run_product(algo, op, a, b, prob, cache):
    """Run one product (forward / grad_input / grad_weight) of ``prob`` with ``algo``,
    split over the batch when that pays (see the module docstring)."""
    parts = parts_for(prob)
    if parts == 1:
        return algo.run(op, a, b, prob, cache)
    bounds = split(prob.batch, parts)
    role_a, role_b = ROLES[op]
    av = _views(cache, role_a, a, bounds)
    bv = _views(cache, role_b, b, bounds) if role_b else [b] * parts
    subs = [dataclasses.replace(prob, batch=hi - lo) for lo, hi in bounds]
    caches = [_part_cache(cache, i, parts) for i in range(parts)]
    outs = run_parts(lambda i: algo.run(op, av[i], bv[i], subs[i], caches[i]), parts)
    if op == "grad_weight":
        total = outs[0]
        for o in outs[1:]:
            total += o
        return total
    return cuda.get_array_module(outs[0]).concatenate(outs, axis=0)   # NumPy: only NumPy is split


def drop_backward_entries(cache):
    """Forget what one backward pass cached (transforms of gy), in every part's cache."""
    for key in [k for k in cache if isinstance(k, tuple) and k[0] == "bwd:views"
                or isinstance(k, str) and k.startswith("bwd:")]:
        del cache[key]
    for key, sub in cache.items():
        if isinstance(key, tuple) and key[0] == "part":
            drop_backward_entries(sub)
