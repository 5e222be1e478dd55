"""Shared benchmark helpers: timing, thread pinning and the side-by-side report."""
import os
import time


def set_threads(n=None):
    """Use the same number of threads for NumPy's BLAS (set before import) and PyTorch.

    Also keeps freed host memory for reuse (``lezero.utils.keep_freed_memory``): a setting
    of the whole process, so both frameworks in the run benefit alike."""
    import torch

    import lezero
    lezero.utils.keep_freed_memory()
    n = n or int(os.environ.get("BENCH_THREADS", os.cpu_count() or 1))
    torch.set_num_threads(n)
    return n


def clock():
    """Wall time by default; ``BENCH_CLOCK=cpu`` counts this thread's CPU time instead,
    which stays meaningful on a loaded machine for single-threaded runs
    (``BENCH_THREADS=1``)."""
    return time.thread_time() if os.environ.get("BENCH_CLOCK", "wall") == "cpu" \
        else time.perf_counter()


def best_time(fn, repeat=7, number=1, warmup=2):
    """The best (minimum) seconds per call over ``repeat`` rounds of ``number`` calls."""
    for _ in range(warmup):
        fn()
    best = float("inf")
    for _ in range(repeat):
        t0 = clock()
        for _ in range(number):
            fn()
        best = min(best, (clock() - t0) / number)
    return best


def report(title, rows):
    """Print rows of (name, lezero seconds, torch seconds, target ratio or None)."""
    print(f"\n== {title}")
    print(f"{'case':<34}{'LeZero':>12}{'PyTorch':>12}{'ratio':>8}{'target':>8}")
    for name, ours, theirs, target in rows:
        ratio = ours / theirs
        mark = "" if target is None else ("ok" if ratio <= target else "MISS")
        tgt = "" if target is None else f"<={target:g}"
        print(f"{name:<34}{_fmt(ours):>12}{_fmt(theirs):>12}{ratio:>8.2f}{tgt:>6} {mark}")


def _fmt(seconds):
    if seconds < 1e-3:
        return f"{seconds * 1e6:.2f} us"
    if seconds < 1:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


def numpy_matmul_peak(n=1024, dtype="float32"):
    """GFLOP/s of a square float32 NumPy matmul: the machine's practical limit."""
    import numpy as np
    a = np.random.rand(n, n).astype(dtype)
    b = np.random.rand(n, n).astype(dtype)
    t = best_time(lambda: a @ b, repeat=5)
    return 2 * n ** 3 / t / 1e9


def limit_threads(n):
    """Give NumPy's BLAS, Numba and PyTorch the same ``n`` threads for the rest of the
    process."""
    from threadpoolctl import threadpool_limits
    import numba
    import torch
    torch.set_num_threads(n)
    numba.set_num_threads(min(n, numba.config.NUMBA_NUM_THREADS))
    return threadpool_limits(limits=n)


def interleaved_times(fns, rounds=10, warmup=2, pause=0.0):
    """Per function, the seconds of each call, timed in alternating rounds so that all of
    them meet the same machine load (a shared machine's load drifts).  ``pause`` sleeps
    before each call so the previous contender's spinning threads go idle first."""
    for fn in fns:
        for _ in range(warmup):
            fn()
    times = [[] for _ in fns]
    for _ in range(rounds):
        for i, fn in enumerate(fns):
            if pause:
                time.sleep(pause)
            t0 = clock()
            fn()
            times[i].append(clock() - t0)
    return times


def interleaved_best(fns, rounds=10, warmup=2):
    """Best seconds per call of each function, in alternating rounds."""
    return [min(t) for t in interleaved_times(fns, rounds, warmup)]


def interleaved_best_median(fns, rounds, warmup=2):
    """(best, median) seconds of each function, in alternating rounds with a pause."""
    import numpy as np
    return [(min(t), float(np.median(t)))
            for t in interleaved_times(fns, rounds, warmup, pause=0.02)]
