"""A large product's blocks on native worker threads: no Python, so no GIL, between them.

``gemm`` cuts a large product into row or column blocks (``gemm.blocks``) and a stack of
products into ranges of matrices.  Run as ``run_parts`` on LeZero's worker threads, each
part waits for Python's GIL twice -- to start and to join -- and each wait that sleeps is
a futex wake-up, slow on a virtual machine whose idle core had halted (measured in
docs/performance.md, "The second core"); PyTorch's OpenMP threads never touch the GIL.

Here each worker thread runs ``_serve``, a Numba function that never returns to Python.
It waits on its mailbox (a row of int64: ``POSTED``, ``DONE``, ``STATE`` and the task's
arguments) and calls MKL's ``cblas_sgemm``/``cblas_dgemm`` by pointer.  The caller posts
tasks 1.. to the workers, computes task 0 itself, then waits for their ``DONE`` counts
(``waits``: a bounded spin, then growing sleeps).  Between products a worker polls its
mailbox with ``sched_yield`` (so a thread that needs its core gets it: the batch parts of
a convolution run on LeZero's Python workers) for ``policy.team_spin`` polls, then dozes
in ``usleep(policy.team_doze_us)``; after ``policy.team_doze_polls`` dozes it sleeps,
``policy.team_sleep_us`` at first and twice as long each time up to
``policy.team_sleep_max_us`` (a long-idle process wakes it a few times a second).  A
caller that finds a worker in that sleep does not wait for it: it returns False
(``gemm`` then runs the parts as before) and posts a wake-up, so the next product finds
the worker polling.

One caller at a time (a lock; another thread's product takes the old way meanwhile).
After a fork the child starts its own workers.  ``policy.gemm_team = 0`` turns it off.
"""
import os
import threading

import numpy as np

from lezero.runtime import mkl
from lezero.runtime.lazyjit import jit, numba_available
from lezero.runtime.settings import policy
from lezero.runtime.waits import (arrive, atomic_add, atomic_load, atomic_store,
                                  sched_yield, sleep_available, spin_until, usleep)

__all__ = ["run", "run_stack", "available", "workers_started"]

# a mailbox: counters first, then the block's arguments; 32 int64 (256 bytes) per worker
POSTED, DONE, STATE = 0, 1, 2
KIND, TA, TB, M, N, K, PA, LDA, PB, LDB, PC, LDC, COUNT, SA, SB, SC = range(4, 20)
BOX = 32
POLLING, DOZING, SLEEPING = 0, 1, 2
SGEMM, DGEMM, WAKE, QUIT = 0, 1, 2, 3


@jit(cache=True, nogil=True)
def _serve(box, sgemm, dgemm, spins, doze_us, dozes, sleep_us, sleep_max_us):
    """A worker's life: wait for a posted task (``COUNT`` products, each ``SA``/``SB``/``SC``
    bytes after the last), run it, count it done; forever (until a QUIT task)."""
    posted, done, state = box[POSTED:POSTED + 1], box[DONE:DONE + 1], box[STATE:STATE + 1]
    taken = 0
    while True:
        polls = 0
        pause = sleep_us
        while atomic_load(posted) == taken:
            polls += 1
            if polls < spins:
                sched_yield()
            elif polls < spins + dozes:
                if polls == spins:
                    atomic_store(state, DOZING)
                usleep(doze_us)
            else:
                if polls == spins + dozes:
                    atomic_store(state, SLEEPING)
                usleep(pause)
                pause = min(2 * pause, sleep_max_us)     # a long idle: few wake-ups
        atomic_store(state, POLLING)
        taken += 1
        kind = box[KIND]
        if kind == QUIT:
            atomic_add(done, 1)
            return
        for j in range(box[COUNT]):         # COUNT matrices, SA/SB/SC bytes apart
            a, b, c = box[PA] + j * box[SA], box[PB] + j * box[SB], box[PC] + j * box[SC]
            if kind == SGEMM:
                sgemm(101, box[TA], box[TB], box[M], box[N], box[K], np.float32(1), a,
                      box[LDA], b, box[LDB], np.float32(0), c, box[LDC])
            elif kind == DGEMM:
                dgemm(101, box[TA], box[TB], box[M], box[N], box[K], np.float64(1), a,
                      box[LDA], b, box[LDB], np.float64(0), c, box[LDC])
        atomic_add(done, 1)


@jit(cache=True, nogil=True)
def _sleep_until(counter, target, polls):
    """Sleep 1, 2, 4 .. 512 us at a time until ``counter[0]`` reaches ``target``, at
    most ``polls`` sleeps; True when it did."""
    pause = 1
    for _ in range(polls):
        if atomic_load(counter) >= target:
            return True
        usleep(pause)
        pause = min(2 * pause, 512)
    return atomic_load(counter) >= target


_lock = threading.Lock()
_team = {"pid": None, "threads": [], "posted": []}     # threads: (thread, mailbox)


def available():
    """True where the team can run: Numba, float products on MKL, the C library's sleeps,
    the setting on."""
    return bool(policy.gemm_team) and numba_available() and mkl.used() \
        and sleep_available()


def workers_started():
    """How many workers this process has started (0 before the first product)."""
    return len(_team["threads"]) if _team["pid"] == os.getpid() else 0


def _workers(n):
    """The mailboxes of ``n`` workers, started as needed (anew in a forked child)."""
    if _team["pid"] != os.getpid():
        _team.update(pid=os.getpid(), threads=[], posted=[])
    while len(_team["threads"]) < n:
        box = np.zeros(BOX, np.int64)
        lib = mkl.library()
        thread = threading.Thread(
            target=_serve, name=f"lezero-gemm-{len(_team['threads'])}", daemon=True,
            args=(box, lib.cblas_sgemm, lib.cblas_dgemm, int(policy.team_spin),
                  int(policy.team_doze_us), int(policy.team_doze_polls),
                  int(policy.team_sleep_us), int(policy.team_sleep_max_us)))
        _team["threads"].append((thread, box))
        _team["posted"].append(0)
        thread.start()
    return [box for _, box in _team["threads"][:n]]


def run(by_rows, ranges, a, ta, b, tb, out):
    """``out = a @ b`` with block ``ranges[0]`` (rows of ``a`` when ``by_rows``, else
    columns of ``b``) on this thread and the others on the team's workers; ``ta``/``tb``
    from ``mkl.operand``, ``out`` with a unit column stride, the caller's checks made
    (``gemm._into``).  False, having computed nothing, when the team cannot take it now."""
    item = out.itemsize
    pa, pb, pc = mkl.address(a), mkl.address(b), mkl.address(out)
    (m, k), n = a.shape, b.shape[1]
    ldc = out.strides[0] // item
    kind = SGEMM if a.dtype == np.float32 else DGEMM
    tasks = []
    for lo, hi in ranges:
        if by_rows:
            step = ta[1] if ta[0] == mkl.NO_TRANS else 1
            tasks.append((kind, ta[0], tb[0], hi - lo, n, k, pa + lo * step * item, ta[1],
                          pb, tb[1], pc + lo * ldc * item, ldc, 1, 0, 0, 0))
        else:
            step = 1 if tb[0] == mkl.NO_TRANS else tb[1]
            tasks.append((kind, ta[0], tb[0], m, hi - lo, k, pa, ta[1],
                          pb + lo * step * item, tb[1], pc + lo * item, ldc, 1, 0, 0, 0))
    return _run(tasks)


def run_stack(dtype, ta, tb, shape, addresses, strides, ldc, ranges):
    """A stack of ``(m, n, k) = shape`` products, matrix ``j`` at ``addresses`` (of the
    first a, b and out) plus ``j`` times ``strides`` (bytes), the ranges of ``j`` in
    ``ranges`` split as in ``run``; the caller checked every matrix as ``gemm.stacked``
    does.  False, having computed nothing, when the team cannot take it now."""
    kind = SGEMM if dtype == np.float32 else DGEMM
    (pa, pb, pc), (sa, sb, sc) = addresses, strides
    return _run([(kind, ta[0], tb[0], *shape, pa + lo * sa, ta[1], pb + lo * sb, tb[1],
                  pc + lo * sc, ldc, hi - lo, sa, sb, sc) for lo, hi in ranges])


def _run(tasks):
    """``tasks[1:]`` on the workers, ``tasks[0]`` here; False when the team cannot."""
    if not available() or not _lock.acquire(blocking=False):
        return False
    try:
        boxes = _workers(len(tasks) - 1)
        # a mailbox is rewritten only once its last task is done; a sleeping worker is
        # not waited for, but woken for the next product
        if any(box[DONE] != _team["posted"][i] for i, box in enumerate(boxes)):
            return False
        asleep = [i for i, box in enumerate(boxes) if box[STATE] == SLEEPING]
        for i in asleep:
            _post(i, boxes[i], (WAKE,))
        if asleep:
            return False
        for i, box in enumerate(boxes):
            _post(i, box, tasks[i + 1])
        kind, ta, tb, m, n, k, pa, lda, pb, ldb, pc, ldc, count, sa, sb, sc = tasks[0]
        dtype = np.float32 if kind == SGEMM else np.float64
        for j in range(count):
            mkl.gemm_at(dtype, (ta, lda), (tb, ldb), m, n, k, pa + j * sa, pb + j * sb,
                        pc + j * sc, ldc)
        for i, box in enumerate(boxes):
            _wait(i, box)
        return True
    finally:
        _lock.release()


def _post(i, box, args):
    box[KIND:KIND + len(args)] = args
    _team["posted"][i] += 1
    arrive(box[POSTED:POSTED + 1])      # atomic, after the arguments: the worker reads them


def _wait(i, box):
    done, target = box[DONE:DONE + 1], _team["posted"][i]
    if spin_until(done, target, policy.spin_reads):
        return
    thread = _team["threads"][i][0]
    while not _sleep_until(done, target, 2000):
        if not thread.is_alive():
            raise RuntimeError(f"gemm_team: worker {thread.name} has stopped")
