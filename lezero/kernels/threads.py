"""Running a kernel's independent parts on a few Python threads.

A convolution's samples and a max pooling's planes (forward and scatter backward) are
independent, so ``run_parts`` cuts such work into one part per thread and runs the parts
at once: part 0 on the calling thread, the others on a small pool of worker threads, each
with BLAS held to one thread and the Numba kernels serial (``serial_kernels``).  The
kernels release the GIL (``nogil``), so the parts truly overlap.

Why not Numba's own parallel loops (``prange``) for these small, frequent kernels: their
OpenMP threads spin after each region and fought OpenBLAS's threads in the GEMMs between
them -- GPT-mini's step went from 1.00 to 1.88 of PyTorch's time with its GELU, softmax
and layer norm on ``prange`` (2 threads, `benchmarks/bench_workloads.py gpt`,
2026-12-04).  The workers (``lezero.kernels.workers``) sleep between calls; only the
join spins, briefly, on the calling thread.

The thread count is ``lz.Config.conv_threads`` (0: ``NUMBA_NUM_THREADS``, else
``OMP_NUM_THREADS``, else the CPU count); it started as the convolutions' setting and now
governs every batch-split kernel.  Splitting needs ``threadpoolctl`` (to hold BLAS to one
thread inside the parts); without it ``threads_for`` says 1 and the work runs as one call.
"""
import collections
import functools
import os
import time

from lezero.core import get_config, register_setting
from lezero.kernels import workers
from lezero.kernels.blas import held_to_one_thread
from lezero.kernels.conv_launch import serial_kernels, serial_only

register_setting("conv_threads", 0)
register_setting("split_when_faster", True)     # False: SplitWhenFaster runs one call

_blas = {"controller": None}


_from_environment = []      # the count the environment gives, read once per process


def threads():
    """The number of threads a batch-split kernel may use."""
    n = get_config().conv_threads
    if n:
        return int(n)
    if not _from_environment:
        # read once: every kernel call asks, and os.cpu_count() alone took 8 us here
        env = os.environ.get("NUMBA_NUM_THREADS") or os.environ.get("OMP_NUM_THREADS")
        _from_environment.append(int(env) if env else (os.cpu_count() or 1))
    return _from_environment[0]


def blas_controller():
    """A threadpoolctl controller (None when threadpoolctl is not installed)."""
    if _blas["controller"] is None:
        try:
            import threadpoolctl
            _blas["controller"] = threadpoolctl.ThreadpoolController()
        except Exception:            # not installed, or it cannot inspect this process
            _blas["controller"] = False
    return _blas["controller"] or None


def threads_for(items, work, min_work):
    """How many parts to cut ``items`` independent items of ``work`` total (any unit)
    into: up to one per thread, each part at least ``min_work``; 1 means no split, and so
    does a call from inside a part (a nested split would wait on its own pool)."""
    n = min(threads(), items, int(work // min_work))
    if n < 2 or serial_only() or blas_controller() is None:
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
    """``[fn(0), ..., fn(count - 1)]`` with part 0 on this thread and the others on the
    worker threads (``lezero.kernels.workers``), BLAS held to one thread and the Numba
    kernels serial in each; an exception of any part is raised here, after all ended."""
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


# An elementwise kernel is split only when each part gets this many elements: a split costs
# about 100 us here (a thread wake-up and join, ~55 us, plus holding BLAS to one thread),
# which is what GELU takes for ~60-100k float32 elements.  Cheaper kernels pass a larger
# ``min_part``: ReLU does 300k elements in 41 us, so splitting it rarely pays.
MIN_PART_ITEMS = 1 << 17


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
    once on several threads when each range gets at least ``min_part`` elements (default
    ``MIN_PART_ITEMS``; the kernel must release the GIL)."""
    n = same_length("run_elementwise", arrays)
    run_split(_on_range(kernel, arrays), n, threads_for(n, n, min_part or MIN_PART_ITEMS))


def _on_range(kernel, arrays):
    """``fn(lo, hi)``: ``kernel`` on the elements lo..hi of each 1-D array."""
    return lambda lo, hi: kernel(*[a[lo:hi] for a in arrays])


class SplitWhenFaster:
    """Split a memory-bound kernel only while splitting is measured to be faster.

    Whether two threads beat one on a pass over memory depends on the memory's state, and
    on this VM that state changes for seconds at a time: with the cache warm a split costs
    more than it saves, in the spells when memory runs several times slower one core
    cannot draw the bandwidth and a split halves the time (the MLP benchmark's SGD
    update: 0.33 ms on one thread, 0.40 split, in a slow spell 2.2 and 1.05;
    docs/performance.md, change 22, 2026-12-06).  So each way keeps its last
    ``window`` timings in seconds per element, the way with the lower minimum runs, and
    every ``explore``-th call runs the other, to notice when the state changes.  The
    minimum, because noise only ever adds time: a preempted call or a cold first one
    (page faults) does not count against its way, while a lasting change of state
    replaces a way's timings within ``window`` calls of it.  ``lz.Config.split_when_faster
    = False`` makes every call one call.
    """

    def __init__(self, min_part, explore=16, window=3):
        from lezero.utils.checks import check_int      # lezero.utils imports the kernels
        self.min_part = check_int("SplitWhenFaster", "min_part", min_part, low=1)
        self.explore = check_int("SplitWhenFaster", "explore", explore, low=2)
        window = check_int("SplitWhenFaster", "window", window, low=1)
        self.timings = {False: collections.deque(maxlen=window),
                        True: collections.deque(maxlen=window)}     # by "split?"
        self.calls = 0

    def cost(self, split):
        """The least seconds per element of the last calls made that way (None if none)."""
        t = self.timings[split]
        return min(t) if t else None

    def run(self, kernel, *arrays):
        """``kernel(*arrays)`` (1-D arrays of one length), in one call or split."""
        n = same_length("SplitWhenFaster.run", arrays)
        parts = threads_for(n, n, self.min_part)
        if parts == 1 or not get_config().split_when_faster:
            return kernel(*arrays)
        self.calls += 1
        one, many = self.cost(False), self.cost(True)
        if one is None or many is None:     # measure each way first
            split = one is not None
        else:
            split = (many < one) != (self.calls % self.explore == 0)
        start = time.perf_counter()
        run_split(_on_range(kernel, arrays), n, parts if split else 1)
        self.timings[split].append((time.perf_counter() - start) / n)
