"""``DataLoader``: batches from a dataset, built in the main process or in worker processes.

Reproducibility.  Every random choice is derived from the loader's ``seed``: the shuffle
order (one generator that advances epoch by epoch) and, for each batch, the generator that
``lezero.data.get_rng()`` returns while the batch is built (from the epoch and the batch's
position).  The sampler always runs in the main process, so with the same seed the batches
are the same whatever ``num_workers`` is.  ``seed=None`` draws the seed from LeZero's
process generator when the loader is made, so ``lz.manual_seed`` reproduces the run.
"""
import multiprocessing

from lezero.data._fetch import IterableFetcher, MapFetcher, batch_stream
from lezero.data._random import SHUFFLE, draw_seed, stream
from lezero.data._workers import WorkerPool, finalizer
from lezero.data.collate import default_collate, default_convert
from lezero.data.dataset import IterableDataset
from lezero.data.sampler import BatchSampler, RandomSampler, SequentialSampler
from lezero.utils.checks import check_bools, check_callable, check_int, check_number

__all__ = ["DataLoader"]


class DataLoader:
    """Iterate over ``dataset`` in batches (``torch.utils.data.DataLoader``'s arguments).

    ``batch_size=None`` turns batching off (each item is yielded as the dataset gives it).
    ``shuffle`` draws a new order every epoch; ``sampler`` / ``batch_sampler`` choose the
    indices instead.  With ``num_workers > 0``, worker processes build up to
    ``prefetch_factor`` batches each ahead of time and hand them back through shared
    memory; ``persistent_workers`` keeps them between epochs; ``timeout`` (seconds, 0 for
    none) bounds the wait for one batch; ``worker_init_fn(worker_id)`` runs in each worker
    first.  ``multiprocessing_context`` is a start method name or context ("fork" where
    available, else "spawn").  Batches are NumPy arrays (see ``default_collate``).
    """

    def __init__(self, dataset, batch_size=1, shuffle=False, sampler=None, batch_sampler=None,
                 num_workers=0, collate_fn=None, drop_last=False, prefetch_factor=2,
                 persistent_workers=False, timeout=0, worker_init_fn=None, seed=None,
                 multiprocessing_context=None):
        _check_arguments(num_workers, prefetch_factor, batch_size, timeout, shuffle, drop_last,
                         persistent_workers, seed, collate_fn, worker_init_fn)
        self.dataset = dataset
        self.num_workers = int(num_workers)
        self.prefetch_factor = int(prefetch_factor)
        self.persistent_workers = persistent_workers
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.seed = draw_seed() if seed is None else int(seed)
        self.multiprocessing_context = _context(multiprocessing_context)
        self._iterable = isinstance(dataset, IterableDataset)
        if self._iterable:
            if shuffle or sampler is not None or batch_sampler is not None:
                raise ValueError("DataLoader: an IterableDataset decides its own order; "
                                 "shuffle, sampler and batch_sampler must be left unset")
        elif not hasattr(dataset, "__getitem__"):
            raise TypeError(f"DataLoader: dataset must be a map-style Dataset (with "
                            f"__getitem__) or an IterableDataset, got "
                            f"{type(dataset).__name__}")
        sampler, batch_sampler, batch_size, drop_last = self._samplers(
            batch_size, shuffle, sampler, batch_sampler, drop_last)
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self._auto_collation = batch_sampler is not None or (self._iterable and
                                                            batch_size is not None)
        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else default_convert
        self.collate_fn = collate_fn
        self._epoch = -1
        self._iterator = None

    def _samplers(self, batch_size, shuffle, sampler, batch_sampler, drop_last):
        """The index sampler and the batch sampler the arguments describe (checked for
        conflicts), with batch_size and drop_last as they then apply."""
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("DataLoader: batch_sampler is mutually exclusive with "
                                 "batch_size, shuffle, sampler and drop_last")
            batch_size, drop_last = None, False
        elif batch_size is None and drop_last:
            raise ValueError("DataLoader: drop_last=True needs a batch_size")
        if sampler is not None and shuffle:
            raise ValueError("DataLoader: sampler is mutually exclusive with shuffle")
        if sampler is None and not self._iterable:
            sampler = (RandomSampler(self.dataset, generator=stream(self.seed, SHUFFLE))
                       if shuffle else SequentialSampler(self.dataset))
        if batch_sampler is None and batch_size is not None and not self._iterable:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        for name, s in (("sampler", sampler), ("batch_sampler", batch_sampler)):
            if s is not None and not hasattr(s, "__iter__"):
                raise TypeError(f"DataLoader: {name} must be iterable, got "
                                f"{type(s).__name__}")
        return sampler, batch_sampler, batch_size, drop_last

    # ----- iteration ---------------------------------------------------------------------
    def __iter__(self):
        self._epoch += 1
        if self.num_workers == 0:
            return _SingleProcessIter(self, self._index_iter(), self._epoch)
        if self.persistent_workers and self._iterator is not None and self._iterator.alive():
            self._iterator.reset(self._index_iter(), self._epoch)
            return self._iterator
        it = _MultiProcessIter(self)
        it.reset(self._index_iter(), self._epoch)
        if self.persistent_workers:
            self._iterator = it
        return it

    def _index_iter(self):
        """This epoch's batches of indices (None for an iterable dataset)."""
        if self._iterable:
            return None
        return iter(self.batch_sampler if self._auto_collation else self.sampler)

    def __len__(self):
        if self._iterable:
            n = len(self.dataset)       # TypeError when the stream has no length
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        return len(self.batch_sampler if self._auto_collation else self.sampler)

    def __repr__(self):
        return (f"DataLoader({type(self.dataset).__name__}, batch_size={self.batch_size}, "
                f"num_workers={self.num_workers}, seed={self.seed})")

    def _worker_cfg(self, worker_id, prefix):
        return {"dataset": self.dataset, "iterable": self._iterable,
                "auto_collation": self._auto_collation, "collate_fn": self.collate_fn,
                "batch_size": self.batch_size, "drop_last": self.drop_last,
                "worker_id": worker_id, "num_workers": self.num_workers, "seed": self.seed,
                "start_epoch": self._epoch, "prefix": prefix,
                "worker_init_fn": self.worker_init_fn}


class _SingleProcessIter:
    """``num_workers=0``: build each batch in the main process when asked for."""

    def __init__(self, loader, index_iter, epoch):
        self._seed, self._epoch = loader.seed, epoch
        self._indices = index_iter
        self._position = 0
        if loader._iterable:
            self._fetcher = IterableFetcher(loader.dataset, loader._auto_collation,
                                            loader.collate_fn, loader.batch_size,
                                            loader.drop_last)
        else:
            self._fetcher = MapFetcher(loader.dataset, loader._auto_collation,
                                       loader.collate_fn)

    def __iter__(self):
        return self

    def __next__(self):
        if self._indices is None:      # iterable: stream position of (worker 0, batch k)
            with batch_stream(self._seed, self._epoch, 0, self._position):
                batch = self._fetcher.fetch()
        else:
            indices = next(self._indices)
            with batch_stream(self._seed, self._epoch, self._position):
                batch = self._fetcher.fetch(indices)
        self._position += 1
        return batch


class _MultiProcessIter:
    """``num_workers > 0``: keep every worker ``prefetch_factor`` batches ahead.

    Holds no reference to the loader (a loader keeping a persistent iterator must not form
    a cycle with it, or the workers would outlive the loader until a GC pass).
    """

    def __init__(self, loader):
        self._num_workers = loader.num_workers
        self._timeout = loader.timeout
        self._persistent = loader.persistent_workers
        self._iterable = loader._iterable
        self._pool = WorkerPool(loader.multiprocessing_context, loader.num_workers,
                                loader.prefetch_factor, loader._worker_cfg)
        self._slots = self._pool.reader
        self._finalizer = finalizer(self, self._pool)
        self._seed = loader.seed
        self._tasks = {}            # batch index -> (worker, slot)
        self._send_idx = self._rcvd_idx = 0

    def alive(self):
        return self._pool.alive()

    def reset(self, index_iter, epoch):
        """Start an epoch: finish the previous one's batches, then prefetch."""
        while self._rcvd_idx < self._send_idx:        # an epoch left early: drain it
            w, slot = self._tasks.pop(self._rcvd_idx)
            self._pool.recv(w, self._timeout, "a batch of the previous epoch")
            self._slots.discard(w, slot)
            self._rcvd_idx += 1
        self._indices = index_iter
        self._epoch = epoch
        self._send_idx = self._rcvd_idx = 0
        self._tasks.clear()
        self._active = [True] * self._num_workers
        self._next_worker = 0
        for w in range(self._num_workers):
            self._pool.send(w, ("reset", epoch, self._seed))
        while self._put():
            pass

    def _put(self):
        """Send one more batch to the next worker with room for it; False when none can."""
        for i in range(self._num_workers):
            w = (self._next_worker + i) % self._num_workers
            if self._active[w] and self._slots.can_build(w):
                break
        else:
            return False
        indices = None
        if self._indices is not None:
            indices = next(self._indices, None)
            if indices is None:
                return False
        slot = self._slots.take(w)
        try:
            self._pool.send(w, ("fetch", self._epoch, self._send_idx, slot, indices))
        except BaseException:
            self._slots.discard(w, slot)     # nothing will be built in it
            raise
        self._tasks[self._send_idx] = (w, slot)
        self._send_idx += 1
        self._next_worker = (w + 1) % self._num_workers
        return True

    def __iter__(self):
        return self

    def __next__(self):
        while True:
            if self._pool.failure is not None:    # a dead worker broke this iterator:
                raise RuntimeError(self._pool.failure)     # say so again, never stop
            if self._rcvd_idx == self._send_idx or self._pool.closed:
                if not self._persistent:
                    self._pool.shutdown()
                raise StopIteration
            w, slot = self._tasks.pop(self._rcvd_idx)
            status, _, _, _, payload = self._pool.recv(w, self._timeout,
                                                       f"batch {self._rcvd_idx}")
            self._rcvd_idx += 1
            try:
                if status == "ok":      # views of the slot: held while the user has them
                    return self._slots.read(w, slot, payload)
                self._slots.discard(w, slot)
                if status == "err":
                    payload.reraise()
                self._active[w] = False          # "end": this worker's stream ran out
            finally:                  # whatever became of this batch, keep the queue full
                self._put()

    def _shutdown_workers(self):
        """Stop the workers now (also done automatically when the iterator is deleted)."""
        self._pool.shutdown()


def _check_count(name, value, low):
    """An int (TypeError otherwise) of at least ``low`` (ValueError otherwise)."""
    if check_int("DataLoader", name, value) < low:
        raise ValueError(f"DataLoader: {name} must be an integer >= {low}, got {value!r}")


def _check_arguments(num_workers, prefetch_factor, batch_size, timeout, shuffle, drop_last,
                     persistent_workers, seed, collate_fn, worker_init_fn):
    """The checks of the constructor's arguments taken one by one."""
    _check_count("num_workers", num_workers, 0)
    _check_count("prefetch_factor", prefetch_factor, 1)
    if batch_size is not None:
        _check_count("batch_size", batch_size, 1)
    if check_number("DataLoader", "timeout", timeout) < 0:
        raise ValueError(f"DataLoader: timeout must be a non-negative number of seconds, "
                         f"got {timeout!r}")
    check_bools("DataLoader", shuffle=shuffle, drop_last=drop_last,
                persistent_workers=persistent_workers)
    if persistent_workers and num_workers == 0:
        raise ValueError("DataLoader: persistent_workers=True needs num_workers > 0")
    if seed is not None:
        _check_count("seed", seed, 0)
    check_callable("DataLoader", "collate_fn", collate_fn, allow_none=True)
    check_callable("DataLoader", "worker_init_fn", worker_init_fn, allow_none=True)


def _context(ctx):
    if ctx is None:
        methods = multiprocessing.get_all_start_methods()
        return multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    if isinstance(ctx, str):
        try:
            return multiprocessing.get_context(ctx)
        except ValueError:
            raise ValueError(f"DataLoader: multiprocessing_context {ctx!r} is not one of "
                             f"{multiprocessing.get_all_start_methods()}") from None
    if not hasattr(ctx, "Process"):
        raise TypeError(f"DataLoader: multiprocessing_context must be a start method name "
                        f"or a multiprocessing context, got {type(ctx).__name__}")
    return ctx
