"""How the convolution kernels are launched: in parallel over planes, or serially.

Every convolution kernel exists twice: a serial ``*_planes(..., first, stop)`` function
that does a range of (n, c) planes and releases the GIL, and a parallel driver that spreads
all planes over Numba's thread pool.  ``launch`` picks one:

* serially when the work is small (waking the pool costs more than the work, and on a
  busy machine a parallel region waits until every thread gets a time slice), or when
  Numba is configured for one thread, and
* serially inside ``serial_kernels()``, which the convolution's batch splitter enters on
  each of its own threads: there the parallelism is already one level up.
"""
import contextlib
import threading

SERIAL_BELOW = 1 << 22          # elements (several ms of serial work)

_state = threading.local()


def serial_only():
    """True inside ``serial_kernels()`` on this thread."""
    return getattr(_state, "serial", False)


@contextlib.contextmanager
def serial_kernels():
    """Run every convolution kernel on the calling thread inside this block."""
    before = serial_only()
    _state.serial = True
    try:
        yield
    finally:
        _state.serial = before


def launch(parallel, serial, work, planes, *args):
    """Run a kernel over ``planes`` planes: ``parallel(*args)`` on the thread pool, or
    ``serial(*args, 0, planes)`` on this thread (small work, or inside ``serial_kernels``)."""
    if work >= SERIAL_BELOW and planes > 1 and not serial_only() and _pool_threads() > 1:
        return parallel(*args)
    return serial(*args, 0, planes)


def _pool_threads():
    """Numba's configured thread count (read once; a plain attribute, no pool start)."""
    n = getattr(_state, "pool", None)
    if n is None:
        import numba
        n = _state.pool = numba.config.NUMBA_NUM_THREADS
    return n
