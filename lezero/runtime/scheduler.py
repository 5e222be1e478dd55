"""Running a kernel's independent parts on a few threads: the one scheduler of LeZero.

A convolution's samples, a max pooling's planes, attention's heads and a long elementwise
pass are independent, so ``run_parts`` cuts such work into one part per thread and runs
the parts at once: part 0 on the calling thread, the others on the worker threads
(``workers``), each with BLAS held to one thread and the Numba kernels serial
(``serial_kernels``).  The kernels release the GIL, so the parts truly overlap.
Numba's own parallel loops (``prange``) are used only for large convolution kernels
(``launch``): their OpenMP threads spin after each region and fought OpenBLAS's threads
in the GEMMs between them (docs/performance.md).

How many parts: ``threads_for(items, work, min_work)``, up to ``threads()`` (the setting
``lz.Config.conv_threads``, else ``policy.threads``), each part at least ``min_work``;
one part inside a part, in the serial profile, and without threadpoolctl (BLAS could
not be held to one thread inside the parts).
"""
import contextlib
import functools
import threading

import numpy as np

from lezero.core import get_config
from lezero.runtime import workers
from lezero.runtime import lazyjit
from lezero.runtime.blas import controller, held_to_one_thread, limit_all
from lezero.runtime.settings import policy, state

__all__ = ["threads", "threads_for", "split", "run_parts", "run_split", "run_ranges",
           "run_meeting", "run_elementwise", "same_length", "serial_kernels", "serial_only",
           "launch", "limited_to"]

_local = threading.local()


def threads():
    """The number of threads a split kernel may use (1 in the serial profile)."""
    if state.serial:
        return 1
    n = get_config().conv_threads
    return int(n) if n else policy.threads


def serial_only():
    """True inside ``serial_kernels()`` on this thread (a part of a split call)."""
    return getattr(_local, "serial", False)


@contextlib.contextmanager
def serial_kernels():
    """Run every kernel on the calling thread inside this block."""
    before = serial_only()
    _local.serial = True
    try:
        yield
    finally:
        _local.serial = before


def threads_for(items, work, min_work):
    """How many parts to cut ``items`` independent items of ``work`` total (any unit)
    into: up to one per thread, each part at least ``min_work``; 1 means no split."""
    n = min(threads(), items, int(work // min_work))
    if n < 2 or serial_only() or controller() is None:
        return 1
    return n


def split(count, parts):
    """``parts`` contiguous (start, stop) ranges covering ``range(count)``."""
    edges = [count * i // parts for i in range(parts + 1)]
    return list(zip(edges[:-1], edges[1:]))


def _serially(fn, i):
    with serial_kernels():
        return fn(i)


def run_parts(fn, count):
    """``[fn(0), ..., fn(count - 1)]``: part 0 on this thread, the others on the worker
    threads, BLAS held to one thread and the kernels serial in each; an exception of any
    part is raised here, after all ended.  In the serial profile the parts run one after
    the other on this thread."""
    if state.serial:
        return [_serially(fn, i) for i in range(count)]
    return _on_threads(fn, count)


def run_meeting(fn, count):
    """``fn(i, meeting)`` for parts that meet many times on ``meeting`` (an int64 counter
    for ``waits.arrive_and_wait``): always one thread per part, since such parts cannot
    run one after the other (callers ask ``threads_for`` first, which says 1 in the
    serial profile)."""
    meeting = np.zeros(1, np.int64)
    return _on_threads(lambda i: fn(i, meeting), count)


def _on_threads(fn, count):
    join = workers.Join(count)
    with held_to_one_thread():
        workers.submit(functools.partial(_serially, fn), count, join)
        try:
            first = _serially(fn, 0)
        finally:
            results, errors = join.wait()
    for error in errors:
        if error is not None:
            raise error
    return [first] + results[1:]


def run_split(fn, count, parts):
    """``fn(start, stop)`` over ``parts`` ranges covering ``range(count)``, at once (one
    call when ``parts`` is 1); returns the results in order."""
    if parts <= 1:
        return [fn(0, count)]
    bounds = split(count, parts)
    return run_parts(lambda i: fn(*bounds[i]), parts)


def run_ranges(fn, count, work, min_part):
    """``run_split`` with as many parts as ``threads_for(count, work, min_part)`` allows."""
    return run_split(fn, count, threads_for(count, work, min_part))


def same_length(where, arrays):
    """ValueError unless the 1-D ``arrays`` have one length: an elementwise kernel loops
    over the first one's and indexes the others without bounds checks."""
    n = arrays[0].size
    if any(a.size != n or a.ndim != 1 for a in arrays):
        raise ValueError(f"{where}: the arrays of an elementwise kernel must be 1-D of one "
                         f"length, got shapes {[a.shape for a in arrays]}")
    return n


def run_elementwise(kernel, *arrays, min_part=None):
    """``kernel(*arrays)`` on 1-D arrays of one length, cut into contiguous ranges run at
    once when each gets at least ``min_part`` elements (``policy.min_part_items``)."""
    n = same_length("run_elementwise", arrays)
    run_ranges(on_range(kernel, arrays), n, n, min_part or policy.min_part_items)


def on_range(kernel, arrays):
    """``fn(lo, hi)``: ``kernel`` on the elements lo..hi of each 1-D array."""
    return lambda lo, hi: kernel(*[a[lo:hi] for a in arrays])


def launch(parallel, serial, work, planes, *args, min_part=None):
    """Run a kernel over ``planes`` planes: ``parallel(*args)`` on Numba's thread pool for
    work of at least ``policy.serial_below``; below that, with ``min_part`` given, as
    ranges of planes on the worker threads (``serial(*args, lo, hi)`` each) when every
    part gets ``min_part`` work (a batch-1 convolution's gathers: too little to wake the
    pool, whose threads then spin against the workers' parts); else
    ``serial(*args, 0, planes)`` on this thread -- also inside a part, in the serial
    profile, and when the runtime (``threads()``, e.g. ``OMP_NUM_THREADS=1``) or Numba
    has one thread."""
    if (work >= policy.serial_below and planes > 1 and not serial_only() and not state.serial
            and threads() > 1 and _pool_threads() > 1):
        return parallel(*args)
    if min_part is not None and planes > 1:
        parts = threads_for(planes, work, min_part)
        if parts > 1:
            run_split(lambda lo, hi: serial(*args, lo, hi), planes, parts)
            return None
    return serial(*args, 0, planes)


def _pool_threads():
    """Numba's configured thread count (read once; a plain attribute, no pool start)."""
    n = getattr(_local, "pool", None)
    if n is None:
        import numba
        n = _local.pool = numba.config.NUMBA_NUM_THREADS
    return n


@contextlib.contextmanager
def limited_to(n):
    """At most ``n`` threads inside the block: the split kernels', Numba's parallel loops'
    and every BLAS and OpenMP pool's (a script training a small model on a shared machine
    wants 1: its products are too small to gain from a second thread)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"lezero.runtime.limited_to: n must be a positive int, got {n!r}")
    numba = lazyjit.numba_module()
    before = numba.get_num_threads() if numba else None
    limiter = limit_all(n)
    try:
        if numba:
            numba.set_num_threads(min(n, numba.config.NUMBA_NUM_THREADS))
        with policy.using(threads=n):
            yield
    finally:
        if numba:
            numba.set_num_threads(before)
        if limiter is not None:
            limiter.restore_original_limits()
