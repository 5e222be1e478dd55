"""Shared benchmark helpers: timing, thread pinning and the side-by-side report."""
import itertools
import os
import time


_LIMITS = []


def set_threads(n=None):
    """Give PyTorch, NumPy's BLAS and Numba the same ``n`` threads (``BENCH_THREADS``,
    default all cores) for the rest of the process: ``torch.set_num_threads`` plus a
    threadpoolctl limit on the BLAS pools already loaded.

    Also keeps freed host memory for reuse (``lezero.utils.keep_freed_memory``): a setting
    of the whole process, so both frameworks in the run benefit alike."""
    import lezero
    lezero.utils.keep_freed_memory()
    n = n or int(os.environ.get("BENCH_THREADS", os.cpu_count() or 1))
    _LIMITS.append(limit_threads(n))
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


def round_orders(n):
    """The orders the rounds take in turn: every permutation of up to three contenders
    (each then runs in each place, and after each other one, equally often; with the
    order only reversed, the middle one of three always ran second: docs/performance.md,
    "How it is measured"); for more, forward and reversed."""
    if n <= 3:
        return list(itertools.permutations(range(n)))
    return [tuple(range(n)), tuple(reversed(range(n)))]


def interleaved_times(fns, rounds=10, warmup=2, pause=0.0, block=3):
    """Per function, its fastest call of each round.  A round runs a short block of
    ``block`` warm calls of each function in turn, in the orders of ``round_orders`` by
    turns (two functions alternate), so that all of them meet the same machine load (a
    shared machine's speed drifts by 2x within seconds) while each block still runs with
    warm caches (single interleaved calls would run cache-cold).  ``pause`` sleeps
    before each block so the previous contender's spinning threads go idle first."""
    for fn in fns:
        for _ in range(warmup):
            fn()
    times = [[] for _ in fns]
    orders = round_orders(len(fns))
    for r in range(rounds):
        for i in orders[r % len(orders)]:
            if pause:
                time.sleep(pause)
            best = float("inf")
            for _ in range(block):
                t0 = clock()
                fns[i]()
                best = min(best, clock() - t0)
            times[i].append(best)
    return times


def round_ratios(fns, rounds=10, warmup=2, block=3, ref=1):
    """Median over rounds of each function's time divided by ``fns[ref]``'s in the same
    round (a ratio per round cancels the load both met), and each one's median seconds."""
    import numpy as np
    times = np.array(interleaved_times(fns, rounds, warmup, pause=0.01, block=block))
    ratios = np.median(times / times[ref], axis=1)
    return [float(r) for r in ratios], [float(s) for s in np.median(times, axis=1)]


def ratio_range(measure, runs=3):
    """Call ``measure() -> list of ratios`` ``runs`` times; per entry (min, max) over runs."""
    results = [measure() for _ in range(runs)]
    return [(min(col), max(col)) for col in zip(*results)], results


def interleaved_best(fns, rounds=10, warmup=2):
    """Best seconds per call of each function, in alternating rounds."""
    return [min(t) for t in interleaved_times(fns, rounds, warmup)]


def interleaved_best_median(fns, rounds, warmup=2):
    """(best, median) seconds of each function, in alternating rounds with a pause."""
    import numpy as np
    return [(min(t), float(np.median(t)))
            for t in interleaved_times(fns, rounds, warmup, pause=0.02)]
