"""Keep freed host memory for reuse instead of handing it back to the OS at once.

Every operator allocates its output with NumPy, and a training step frees most of those
arrays again before the next step allocates the same sizes.  With glibc's defaults a
large array (above a few hundred KiB) is either its own ``mmap`` or sits at the top of
the heap, which ``free`` trims; either way the pages go back to the kernel and the next
step takes a page fault on every 4 KiB it touches again.  On the GPT-mini training step
that was about a fifth of the step's time.

``keep_freed_memory()`` asks glibc (through ``mallopt``) to serve arrays up to
``mmap_threshold`` bytes from the heap and to trim the heap only once more than
``trim_threshold`` bytes are free at its top.  Freed arrays then stay mapped and are
reused, as a caching allocator would, at the cost of the process keeping up to
``trim_threshold`` bytes of freed memory resident.

It is opt-in, never a side effect of ``import lezero``: a library should not retune the
allocator of the process that imports it.  Call it once at the start of a training script
(``lezero.demo``, the examples and the benchmarks do)::

    import lezero as lz
    lz.utils.keep_freed_memory()

On a C library without ``mallopt`` (macOS, musl) it changes nothing and returns False.
The setting is per process and also benefits any other library in the process.
"""
import ctypes
import ctypes.util

from lezero.utils.checks import check_int

__all__ = ["keep_freed_memory", "MMAP_THRESHOLD", "TRIM_THRESHOLD"]

# glibc's mallopt parameter numbers (malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3

MMAP_THRESHOLD = 32 << 20    # glibc's ceiling for this setting on 64-bit systems
TRIM_THRESHOLD = 256 << 20   # bounds the freed memory the process keeps resident

_applied = None


def _mallopt():
    """glibc's ``mallopt`` function, or None where the C library has none."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        fn = libc.mallopt
    except (OSError, AttributeError):
        return None
    fn.argtypes, fn.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return fn


def keep_freed_memory(mmap_threshold=MMAP_THRESHOLD, trim_threshold=TRIM_THRESHOLD):
    """Tune glibc's allocator so freed arrays are reused; returns True when applied.

    ``mmap_threshold``: allocations at most this large come from the heap (glibc caps it
    at 32 MiB on 64-bit).  ``trim_threshold``: the heap returns memory to the OS only
    when more than this is free at its top.
    """
    global _applied
    mmap_threshold = check_int("keep_freed_memory", "mmap_threshold", mmap_threshold, low=1)
    trim_threshold = check_int("keep_freed_memory", "trim_threshold", trim_threshold, low=1)
    fn = _mallopt()
    if fn is None:
        return False
    # mallopt returns 1 on success, 0 when glibc rejects the value.
    ok = fn(_M_MMAP_THRESHOLD, mmap_threshold) == 1
    ok = fn(_M_TRIM_THRESHOLD, trim_threshold) == 1 and ok
    _applied = (mmap_threshold, trim_threshold) if ok else None
    return ok


def applied():
    """The (mmap_threshold, trim_threshold) in force from ``keep_freed_memory``, or None."""
    return _applied
