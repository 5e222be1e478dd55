"""Batch-parallel execution: split the batch into parts and run each part on its own thread.

A convolution product is independent per sample (the weight gradient is a sum over
samples), so ``run_product`` cuts the batch into one part per thread, runs the chosen
algorithm on each part with single-threaded BLAS and serial Numba kernels, and joins the
parts (``lezero.runtime.run_parts``).  That is one fork and one join per product, where
threading inside each GEMM and each kernel would synchronise ~100 times per layer: on a
shared, oversubscribed machine every synchronisation waits for a time slice, and the BLAS
and Numba thread pools spin against each other.

The thread count and the part size come from the runtime (``lz.Config.conv_threads``,
``lezero.runtime.policy.conv_min_part_flops``); for small problems, in the serial
profile, or without ``threadpoolctl``, a single batch-wide call runs instead.
"""
import dataclasses

from lezero import cuda
# threads: re-exported, the notebooks and users read a convolution's thread count here
from lezero.runtime import (native_products, policy, run_parts, split,  # noqa: F401
                            threads, threads_for)
from lezero.functions.conv.algorithm import drop_kept, store

# Which operand of each product is batched, by role: views of the same array are shared
# between products (forward and grad_weight both cut x) so per-part caches keep working.
ROLES = {"forward": ("x", None), "grad_input": ("gy", None), "grad_weight": ("x", "gy")}


def parts_for(prob, algo=None):
    """How many batch parts to run ``prob`` in (1: no split).  An algorithm whose work is
    mostly products (``algo.product_flops``) splits the batch only from
    ``policy.conv_product_min_part_flops`` a part where its products split over native
    threads by themselves (``native_products``: the runtime's team on MKL, OpenBLAS's own
    threads for products that are not small): below that they split there, with no GIL
    hand-over per part (docs/performance.md) -- and, where the split narrows its one
    product (``algo.sample_columns``), only into parts of ``policy.conv_min_part_columns``
    columns or more."""
    if prob.backend != "numpy" or prob.batch < 2:
        return 1
    least, most = policy.conv_min_part_flops, prob.batch
    flops = algo.product_flops(prob) if algo is not None else 0
    if flops and native_products(flops):
        least = max(least, policy.conv_product_min_part_flops)
        # a narrower product runs slower per column than the whole one threaded by
        # itself (im2col's on a 5x5 map at batch 2: docs/performance.md)
        columns = algo.sample_columns(prob) * prob.batch
        if columns:
            most = max(1, int(columns // policy.conv_min_part_columns))
    return min(most, threads_for(prob.batch, prob.flops(), least))


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
    parts = parts_for(prob, algo)
    if parts == 1:
        return algo.run(op, a, b, prob, cache)
    bounds = split(prob.batch, parts)
    role_a, role_b = ROLES[op]
    av = _views(cache, role_a, a, bounds)
    bv = _views(cache, role_b, b, bounds) if role_b else [b] * parts
    subs = [dataclasses.replace(prob, batch=hi - lo) for lo, hi in bounds]
    caches = [_part_cache(cache, i, parts) for i in range(parts)]
    shared = algo.shared(op, b, prob, cache) if role_b is None else {}
    for sub in caches:                  # (a weight transform: once, not once per part)
        for name, (key, value) in shared.items():
            store(sub, name, key, value)
    # forward and grad_input: each part writes its rows of the one output itself, handed
    # them through its cache (``algorithm.output``), not one concatenation after the join
    out = None if op == "grad_weight" else cuda.get_array_module(a).empty(
        prob.y_shape if op == "forward" else prob.x_shape, dtype=a.dtype)

    def part(i):
        if out is None:
            return algo.run(op, av[i], bv[i], subs[i], caches[i])
        rows = out[bounds[i][0]:bounds[i][1]]
        caches[i]["out"] = rows         # the algorithm writes there (algorithm.output) ...
        try:
            y = algo.run(op, av[i], bv[i], subs[i], caches[i])
        finally:
            caches[i].pop("out", None)
        if y is not rows:               # ... or returns its own array, copied in
            copy_rows(rows, y)
    try:
        outs = run_parts(part, parts)
    finally:
        for sub in caches:              # the parent's cache keeps it, within its budget
            for name in shared:
                sub.pop(name, None)
    if out is not None:
        return out
    total = outs[0]
    for o in outs[1:]:
        total += o
    return total


def copy_rows(rows, y):
    """A batch part's result that was not written in its rows of the output, copied in."""
    rows[...] = y


def drop_backward_entries(cache):
    """Forget what one backward pass cached (transforms of gy) and what the forward kept
    for it (its budget given back: a second backward recomputes), in every part's cache."""
    for key in [k for k in cache if isinstance(k, tuple) and k[0] == "bwd:views"
                or isinstance(k, str) and k.startswith("bwd:")]:
        del cache[key]
    drop_kept(cache)
    for key, sub in cache.items():
        if isinstance(key, tuple) and key[0] == "part":
            drop_backward_entries(sub)
