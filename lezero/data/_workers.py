"""Worker processes for the DataLoader.

Protocol.  Each worker has two one-way pipes: tasks from the main process, results to it.
Tasks are ``("reset", epoch, seed)`` at the start of an epoch, then
``("fetch", epoch, batch_index, slot, indices)``; ``None`` asks the worker to exit.  A
result is ``(status, epoch, batch_index, slot, payload)`` with status ``ok`` (payload: the
shared-memory description of the batch), ``end`` (an iterable dataset ran out) or ``err``
(payload: the exception and the worker's traceback as text).

Batches are assigned round-robin and read back in order, so the main process always
knows which pipe the next batch comes from.  While it waits it also watches every
worker's process sentinel, so a worker that dies wakes it at once.  Each worker watches
its parent's sentinel, so workers never outlive a killed main process.
"""
import multiprocessing
import os
import pickle
import random
import signal
import time
import traceback
import weakref
from multiprocessing.connection import wait

import numpy as np

from lezero.data import _shm
from lezero.data._fetch import IterableFetcher, MapFetcher, batch_stream
from lezero.data._random import WORKER

__all__ = ["WorkerInfo", "get_worker_info"]

_SHUTDOWN_GRACE_S = 2.0     # how long finished workers get to exit before SIGTERM


class WorkerInfo:
    """What a worker knows about itself (``get_worker_info()`` inside a worker).

    ``id`` (0 .. num_workers-1), ``num_workers``, ``seed`` (this worker's seed; NumPy's
    legacy global generator and Python's ``random`` are seeded from it) and ``dataset``
    (this worker's copy of the dataset).
    """

    def __init__(self, id, num_workers, seed, dataset):
        self.id, self.num_workers, self.seed, self.dataset = id, num_workers, seed, dataset

    def __repr__(self):
        return (f"WorkerInfo(id={self.id}, num_workers={self.num_workers}, "
                f"seed={self.seed}, dataset={type(self.dataset).__name__})")


_worker_info = None


def get_worker_info():
    """The ``WorkerInfo`` of the current DataLoader worker, or None in the main process."""
    return _worker_info


class RemoteError:
    """An exception raised in a worker, carried to the main process with its traceback."""

    def __init__(self, exc, worker_id, where="while building a batch"):
        self.exc_type = type(exc)
        try:
            pickle.dumps(self.exc_type)
        except Exception:          # a class defined inside a function cannot travel
            self.exc_type = RuntimeError
        tb = "".join(traceback.format_exception(exc))
        self.message = (f"Caught {type(exc).__name__} in DataLoader worker {worker_id} "
                        f"(pid {os.getpid()}) {where}.\nOriginal traceback:\n{tb}")

    def reraise(self):
        msg = self.message
        if self.exc_type is KeyError:
            msg = _KeyErrorMessage(msg)    # KeyError would print the message as a repr
        try:
            err = self.exc_type(msg)
        except Exception:                  # the type needs other constructor arguments
            err = RuntimeError(msg)
        try:
            raise err
        finally:
            # Drop the local: a frame holding its own exception is a reference cycle that
            # would keep the iterator (and its workers) alive until a GC pass.
            err = None


class _KeyErrorMessage(str):
    def __repr__(self):
        return str(self)


# ----- inside a worker ---------------------------------------------------------------------

def _seed_worker(cfg):
    """Give this worker its own NumPy-legacy and Python ``random`` streams."""
    ss = np.random.SeedSequence(cfg["seed"], spawn_key=(WORKER, cfg["start_epoch"]))
    mine = ss.spawn(cfg["num_workers"])[cfg["worker_id"]]
    np.random.seed(mine.generate_state(4))
    seed = int(mine.generate_state(1, np.uint64)[0] >> np.uint64(1))
    random.seed(seed)
    return seed


class _Worker:
    """What one worker process holds: its dataset, fetcher and shared-memory slots."""

    def __init__(self, cfg):
        self.cfg, self.id = cfg, cfg["worker_id"]
        self.iterable = cfg["iterable"]
        self.init_error = None
        if cfg["worker_init_fn"] is not None:
            try:
                cfg["worker_init_fn"](self.id)
            except Exception as e:     # reported with the first batch this worker owes
                self.init_error = RemoteError(e, self.id, "in worker_init_fn")
        self.fetcher = None if self.iterable else MapFetcher(
            cfg["dataset"], cfg["auto_collation"], cfg["collate_fn"])
        self.writer = _shm.SlotWriter(cfg["prefix"], self.id)
        self.seed = self.count = 0

    def reset(self, epoch, seed):
        """A new epoch: an iterable dataset starts its stream again."""
        self.seed, self.count = seed, 0
        if self.iterable:
            self.fetcher = None

    def build(self, epoch, idx, slot, indices):
        """Build batch ``idx`` into ``slot``; returns the reply for the main process."""
        cfg = self.cfg
        status, payload = "ok", None
        arena = self.writer.arena(slot)       # collate stacks into the slot directly
        try:
            if self.init_error is not None:
                status, payload = "err", self.init_error
            elif self.iterable:
                # The stream position is (worker, count): a stream has no global index.
                with batch_stream(self.seed, epoch, self.id, self.count):
                    if self.fetcher is None:
                        self.fetcher = IterableFetcher(cfg["dataset"], cfg["auto_collation"],
                                                       cfg["collate_fn"], cfg["batch_size"],
                                                       cfg["drop_last"])
                    batch = self.fetcher.fetch(arena.alloc)
            else:
                with batch_stream(self.seed, epoch, idx):
                    batch = self.fetcher.fetch(indices, arena.alloc)
            if status == "ok":
                payload = self.writer.write(slot, batch, arena)
        except StopIteration as e:
            if self.iterable:
                status = "end"
            else:     # a map-style dataset has no business raising it
                status, payload = "err", RemoteError(e, self.id)
        except Exception as e:
            status, payload = "err", RemoteError(e, self.id)
        self.count += 1
        return (status, epoch, idx, slot, payload)

    def close(self):
        self.writer.close()


def worker_loop(cfg, task_conn, result_conn, done_event):
    """The body of a worker process (a module-level function, so ``spawn`` can find it)."""
    global _worker_info
    signal.signal(signal.SIGINT, signal.SIG_IGN)    # Ctrl-C is the main process's to handle
    _worker_info = WorkerInfo(cfg["worker_id"], cfg["num_workers"], _seed_worker(cfg),
                              cfg["dataset"])
    worker = _Worker(cfg)
    parent = multiprocessing.parent_process()
    watch = [task_conn] + ([parent.sentinel] if parent is not None else [])
    try:
        while True:
            if task_conn not in wait(watch):
                break                                  # the main process is gone
            msg = task_conn.recv()
            if msg is None or done_event.is_set():
                break
            if msg[0] == "reset":
                worker.reset(*msg[1:])
                continue
            reply = worker.build(*msg[1:])
            try:
                result_conn.send(reply)
            except (pickle.PicklingError, TypeError, AttributeError) as e:
                # Something in the batch cannot be pickled: say so instead of dying.
                result_conn.send(("err",) + reply[1:4] + (RemoteError(e, worker.id),))
    except (EOFError, BrokenPipeError, ConnectionResetError, KeyboardInterrupt):
        pass
    finally:
        worker.close()


# ----- in the main process -----------------------------------------------------------------

class WorkerPool:
    """The worker processes and pipes of one iterator; ``shutdown()`` is idempotent and is
    also called by a finalizer when the iterator is deleted or the interpreter exits."""

    def __init__(self, ctx, num_workers, prefetch, make_cfg):
        from multiprocessing import resource_tracker
        # Share one resource tracker with the workers (fork inherits it only if it already
        # runs), so segments a worker creates and the main process unlinks are tracked once.
        resource_tracker.ensure_running()
        self.prefix = _shm.new_prefix()
        self.done_event = ctx.Event()
        self.procs, self.task_conns, self.result_conns = [], [], []
        self.reader = _shm.SlotReader(self.prefix, num_workers, prefetch)
        self.closed = False
        try:
            for w in range(num_workers):
                task_r, task_w = ctx.Pipe(duplex=False)
                res_r, res_w = ctx.Pipe(duplex=False)
                proc = ctx.Process(target=worker_loop, name=f"lezero-data-worker-{w}",
                                   args=(make_cfg(w, self.prefix), task_r, res_w,
                                         self.done_event), daemon=True)
                proc.start()
                # Close the worker's ends here, so that later forks do not inherit them and
                # a dead worker's pipes report EOF / EPIPE instead of blocking.
                task_r.close()
                res_w.close()
                self.procs.append(proc)
                self.task_conns.append(task_w)
                self.result_conns.append(res_r)
        except BaseException as e:
            self.shutdown()
            if isinstance(e, (pickle.PicklingError, TypeError, AttributeError)):
                raise RuntimeError(f"DataLoader: could not start worker processes with the "
                                   f"'{ctx.get_start_method()}' start method: the dataset, "
                                   f"collate_fn and worker_init_fn must be picklable "
                                   f"({type(e).__name__}: {e})") from e
            raise

    def send(self, w, msg):
        try:
            self.task_conns[w].send(msg)
        except (BrokenPipeError, ConnectionResetError, OSError):
            self.raise_dead(w)

    def recv(self, w, timeout, what):
        """The next result from worker ``w``; raises if any worker died or on timeout."""
        conn = self.result_conns[w]
        sentinels = {p.sentinel: i for i, p in enumerate(self.procs)}
        deadline = None if not timeout else time.monotonic() + timeout
        while True:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready = wait([conn, *sentinels], remaining)
            if conn in ready:
                try:
                    return conn.recv()
                except (EOFError, ConnectionResetError):
                    self.raise_dead(w)
            for s in ready:
                if s in sentinels:
                    self.raise_dead(sentinels[s])
            if not ready and deadline is not None:
                pid = self.procs[w].pid
                self.shutdown()
                raise RuntimeError(f"DataLoader timed out after {timeout} s waiting for "
                                   f"{what} from worker {w} (pid {pid})")

    def raise_dead(self, w):
        proc = self.procs[w]
        proc.join(0.5)
        code = proc.exitcode
        if code is None:
            desc = "its pipe closed"
        elif code < 0:
            name = signal.Signals(-code).name if -code in signal.valid_signals() else -code
            desc = f"killed by signal {name}"
        else:
            desc = f"exit code {code}"
        hint = ""
        if code == -signal.SIGKILL:
            hint = " It may have run out of memory (the OOM killer sends SIGKILL)."
        elif code == -signal.SIGBUS:
            hint = " Shared memory (/dev/shm) may be too small."
        self.shutdown()
        raise RuntimeError(f"DataLoader worker {w} (pid {proc.pid}) exited unexpectedly "
                           f"({desc}).{hint}")

    def alive(self):
        return not self.closed

    def shutdown(self):
        if self.closed:
            return
        self.closed = True
        self.done_event.set()
        for conn in self.task_conns:
            _try_send_none(conn)
        deadline = time.monotonic() + _SHUTDOWN_GRACE_S
        for p in self.procs:
            p.join(max(0.0, deadline - time.monotonic()))
        for p in self.procs:
            if p.is_alive():           # stuck in a long __getitem__: stop it
                p.terminate()
                p.join(1.0)
            if p.is_alive():
                p.kill()
                p.join()
        for conn in self.task_conns + self.result_conns:
            conn.close()
        self.reader.close()


def _try_send_none(conn):
    """Ask a worker to exit without ever blocking: skip it if its task pipe is full (the
    worker then sees the done event before its next task)."""
    import select
    try:
        _, writable, _ = select.select([], [conn.fileno()], [], 0)
        if writable:
            conn.send(None)
    except (OSError, ValueError):
        pass


def finalizer(owner, pool):
    """Shut ``pool`` down when ``owner`` is collected (or at interpreter exit)."""
    return weakref.finalize(owner, pool.shutdown)
