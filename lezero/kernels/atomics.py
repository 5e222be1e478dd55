"""A barrier for kernels whose parts run on several threads and meet many times.

``lezero.kernels.threads.run_parts`` starts one part per thread and joins them once;
that costs a thread wake-up (~50-70 us on this machine), fine once per call but not once
per step of a time loop.  Parts that must meet after every step (the LSTM layer's chunks,
``lezero.kernels.lstm_parts``) instead count arrivals in a shared int64 array with an
atomic add and spin until every part has arrived: each waits only as long as the
slowest part, with no system call.  The count only grows -- after step ``t`` every part
has added one ``t + 1`` times -- so one counter serves every step of a call.

The parts must all run (a part that never arrives leaves the others spinning): the
kernels that use it have no early exits, and ``run_parts`` runs every part on a thread of
its own.
"""
from lezero.kernels import intrinsic, jit


def _counter_pointer(context, builder, aryty, ary):
    """LLVM code: the address of ``counter[0]``."""
    from numba.core import cgutils
    from numba import types
    arr = context.make_array(aryty)(context, builder, ary)
    return cgutils.get_item_pointer(context, builder, aryty, arr,
                                    [context.get_constant(types.intp, 0)])


@intrinsic
def atomic_add(typingctx, counter, value):
    """``counter[0] += value`` as one atomic read-modify-write (sequentially consistent:
    the part's writes before it are visible to a part that reads the new count)."""
    from numba import types
    if not (isinstance(counter, types.Array) and counter.dtype == types.int64):
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
    if not (isinstance(counter, types.Array) and counter.dtype == types.int64):
        return None

    def codegen(context, builder, signature, args):
        ptr = _counter_pointer(context, builder, signature.args[0], args[0])
        return builder.load_atomic(ptr, "acquire", 8)
    return types.int64(counter), codegen


@jit(cache=True, nogil=True)
def arrive_and_wait(counter, target):
    """Count this part's arrival, then spin until ``counter[0]`` reaches ``target``
    (the number of parts times the number of meetings so far)."""
    atomic_add(counter, 1)
    while atomic_load(counter) < target:
        pass


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
