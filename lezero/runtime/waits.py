"""Where threads wait for each other, in Numba code: spin briefly, then sleep.

Parts of a split kernel count their arrivals in a shared int64 array with an atomic add.
A waiter reads the count in a loop for a bounded number of reads (``policy.spin_reads``,
``policy.meet_spin_reads``: 0.1-0.2 ms; a balanced partner arrives within them, with no
system call), and past that bound it
sleeps with a growing interval (``usleep`` of 1, 2, 4 ... 512 us; the kernel's timer
slack makes the first about 50 us) until the count is reached.  So a partner that has no
core -- another process holds it -- costs the waiter no CPU: the core it leaves goes to
the partner or to whoever else needs it.  (Stopping the splits altogether while
partners are late was measured too, and did not pay: docs/performance.md.)

* ``arrive(counter)``: count one arrival (a part of ``run_parts`` done);
* ``spin_until(counter, target, spins)``: the join's bounded spin (it then sleeps on a
  semaphore in Python);
* ``arrive_and_wait(counter, target, spins)``: a barrier for parts that meet many times
  (the LSTM's chunks after every step); the count only grows, so one counter serves
  every meeting of a call.

Every part must arrive (a part that never does leaves the others waiting): the kernels
that meet have no early exits, and each part runs on a thread of its own.
"""
from lezero.runtime.lazyjit import intrinsic, jit

__all__ = ["arrive", "spin_until", "arrive_and_wait", "sleep_available", "MAX_SLEEP_US",
           "atomic_add", "atomic_load", "atomic_store", "usleep", "sched_yield"]

MAX_SLEEP_US = 512


def _counter_pointer(context, builder, aryty, ary):
    """LLVM code: the address of ``counter[0]``."""
    from numba.core import cgutils
    from numba import types
    arr = context.make_array(aryty)(context, builder, ary)
    return cgutils.get_item_pointer(context, builder, aryty, arr,
                                    [context.get_constant(types.intp, 0)])


def _is_counter(counter):
    from numba import types
    return isinstance(counter, types.Array) and counter.dtype == types.int64


@intrinsic
def atomic_add(typingctx, counter, value):
    """``counter[0] += value`` as one atomic read-modify-write (sequentially consistent:
    the part's writes before it are visible to a part that reads the new count)."""
    from numba import types
    if not _is_counter(counter):
        return None

    def codegen(context, builder, signature, args):
        ptr = _counter_pointer(context, builder, signature.args[0], args[0])
        value = context.cast(builder, args[1], signature.args[1], types.int64)
        return builder.atomic_rmw("add", ptr, value, "seq_cst")
    return types.int64(counter, value), codegen


@intrinsic
def atomic_load(typingctx, counter):
    """``counter[0]`` read atomically (acquire: what was written before the add that
    stored it is visible after)."""
    from numba import types
    if not _is_counter(counter):
        return None

    def codegen(context, builder, signature, args):
        ptr = _counter_pointer(context, builder, signature.args[0], args[0])
        return builder.load_atomic(ptr, "acquire", 8)
    return types.int64(counter), codegen


@intrinsic
def usleep(typingctx, microseconds):
    """The C library's ``usleep`` (linked by name, so the kernel still caches to disk)."""
    from llvmlite import ir
    from numba import types
    from numba.core import cgutils

    def codegen(context, builder, signature, args):
        fnty = ir.FunctionType(ir.IntType(32), [ir.IntType(32)])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "usleep")
        us = context.cast(builder, args[0], signature.args[0], types.int32)
        return builder.call(fn, [us])
    return types.int32(microseconds), codegen


@intrinsic
def atomic_store(typingctx, counter, value):
    """``counter[0] = value`` as an atomic store (release: what was written before it is
    visible to a thread that reads the new value with ``atomic_load``)."""
    from numba import types
    if not _is_counter(counter):
        return None

    def codegen(context, builder, signature, args):
        ptr = _counter_pointer(context, builder, signature.args[0], args[0])
        value = context.cast(builder, args[1], signature.args[1], types.int64)
        builder.store_atomic(value, ptr, "release", 8)
        return context.get_dummy_value()
    return types.none(counter, value), codegen


@intrinsic
def sched_yield(typingctx):
    """The C library's ``sched_yield``: a spinning thread lets another runnable thread of
    its core run (linked by name, as ``usleep``)."""
    from llvmlite import ir
    from numba import types
    from numba.core import cgutils

    def codegen(context, builder, signature, args):
        fnty = ir.FunctionType(ir.IntType(32), [])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "sched_yield")
        return builder.call(fn, [])
    return types.int32(), codegen


_found = []


def sleep_available():
    """True when the process exports ``usleep`` (POSIX systems) for the sleeping waits.
    (LLVM finds the process's symbols only once Numba's JIT is set up, so set it up
    first: asked before any kernel compiled, the lookup would say no.)"""
    if not _found:
        from lezero.runtime.lazyjit import numba_available
        if numba_available():
            from llvmlite import binding
            from numba.core.registry import cpu_target
            cpu_target.target_context               # Numba's JIT, as a compile makes it
            _found.append(bool(binding.address_of_symbol("usleep")))
        else:
            _found.append(False)
    return _found[0]


@jit(cache=True, nogil=True)
def arrive(counter):
    """Count one arrival (``counter[0] += 1``, atomically)."""
    atomic_add(counter, 1)


@jit(cache=True, nogil=True)
def spin_until(counter, target, spins):
    """Spin until ``counter[0]`` reaches ``target``, at most ``spins`` reads; True when it
    did.  (The caller holds no lock: the kernel releases the GIL while it spins.)"""
    for _ in range(spins):
        if atomic_load(counter) >= target:
            return True
    return atomic_load(counter) >= target


@jit(cache=True, nogil=True)
def arrive_and_wait(counter, target, spins):
    """Count this part's arrival, then wait until ``counter[0]`` reaches ``target`` (parts
    times meetings so far): ``spins`` reads, then sleeps of 1, 2, 4 ... ``MAX_SLEEP_US``
    microseconds; True when it had to sleep."""
    atomic_add(counter, 1)
    for _ in range(spins):
        if atomic_load(counter) >= target:
            return False
    pause = 1
    while atomic_load(counter) < target:
        usleep(pause)
        pause = min(2 * pause, MAX_SLEEP_US)
    return True
