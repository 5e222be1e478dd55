"""Worker processes for the DataLoader.

Protocol.  Each worker has two one-way pipes: tasks from the main process, results to it.
Tasks are ``("reset", epoch, seed)`` at the start of an epoch, then
``("fetch", epoch, batch_index, slot, indices)``; ``None`` asks the worker to exit.  A
result is ``(status, epoch, batch_index, slot, payload)`` with status ``ok`` (payload: the
shared-memory description of the batch), ``end`` (an iterable dataset ran out) or ``err``
(payload: the exception and the worker's traceback as text).  Replies travel as bytes
the worker pickled itself (``_remote.encode``), so a batch that cannot be pickled is that
batch's error and the worker lives on.  A dead worker or a timeout breaks the pool
(``failure``): every later request raises the same error.

Batches are assigned round-robin and read back in order, so the main process always
knows which pipe the next batch comes from.  While it waits it also watches every
worker's process sentinel, so a worker that dies wakes it at once.  Each worker watches
its parent's sentinel, so workers never outlive a killed main process.
"""
import multiprocessing
import pickle
import random
import signal
import time
import weakref
from multiprocessing.connection import wait
from multiprocessing.reduction import ForkingPickler

import numpy as np

from lezero.data import _shm
from lezero.data._fetch import IterableFetcher, MapFetcher, batch_stream
from lezero.data._random import WORKER
from lezero.data._remote import batch_name, decode, encode, in_worker

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
            except (Exception, SystemExit) as e:     # reported with the first batch owed
                self.init_error = in_worker(e, self.id, "in worker_init_fn")
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
                status, payload = "err", self._error(e, idx, indices)
        except (Exception, SystemExit) as e:     # sys.exit() in a dataset fails its batch
            status, payload = "err", self._error(e, idx, indices)
        self.count += 1
        return (status, epoch, idx, slot, payload)

    def _error(self, exc, idx, indices):
        return in_worker(exc, self.id, f"while building {batch_name(idx, indices)}")

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
            # A batch that cannot be pickled becomes its own error; the worker goes on.
            result_conn.send_bytes(encode(reply, worker.id, msg[4]))
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
        self.failure = None         # why the pool broke (a dead worker, a timeout)
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
            data = ForkingPickler.dumps(msg)
        except Exception as e:    # the sampler gave something that cannot travel
            what = batch_name(msg[2], msg[4]) if msg[0] == "fetch" else repr(msg[0])
            raise TypeError(f"DataLoader: cannot send {what} to worker {w}: the sampler's "
                            f"indices cannot be pickled ({type(e).__name__}: {e})") from None
        try:
            self.task_conns[w].send_bytes(data)
        except (BrokenPipeError, ConnectionResetError, OSError):
            pass    # w died: ``recv`` delivers what it sent before, then raises its death

    def recv(self, w, timeout, what):
        """The next result from worker ``w``; raises if ``w`` died or on timeout.

        Only ``w``'s own death counts here: another worker that died after sending its
        results still delivers them, and its death is raised when its next batch is due
        (so which batches arrive does not depend on timing).  A reply that cannot be
        unpickled comes back as an error reply for ``what``."""
        conn, sentinel = self.result_conns[w], self.procs[w].sentinel
        deadline = None if not timeout else time.monotonic() + timeout
        while True:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready = wait([conn, sentinel], remaining)
            if conn in ready:     # what a dead worker sent before dying is read first
                try:
                    data = conn.recv_bytes()
                except (EOFError, ConnectionResetError, OSError):
                    self.raise_dead(w)
                return decode(data, w, self.procs[w].pid, what)
            if sentinel in ready:
                self.raise_dead(w)
            if not ready and deadline is not None:
                self.fail(f"DataLoader timed out after {timeout} s waiting for {what} from "
                          f"worker {w} (pid {self.procs[w].pid}); the worker was stopped")

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
        self.fail(f"DataLoader worker {w} (pid {proc.pid}) exited unexpectedly ({desc})."
                  f"{hint}")

    def fail(self, message):
        """Stop every worker and raise ``message``; the pool is broken from now on, and
        ``failure`` keeps the message so that every later request raises it again."""
        self.failure = message
        self.shutdown()
        raise RuntimeError(message)

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
