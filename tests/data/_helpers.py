"""Datasets and checks shared by the data tests.

They live in an importable module (not inside test functions) so that workers started
with the 'spawn' method can unpickle them.
"""
import os
import signal
import time

import numpy as np

from lezero.data import Dataset, IterableDataset, get_rng, get_worker_info


class IndexDataset(Dataset):
    """Sample i is ``i``, plus what the worker saw: its pid and two random draws (the
    batch stream of lezero.data.get_rng(), and NumPy's legacy global generator)."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if not 0 <= i < self.n:
            raise IndexError(i)
        return {"index": i, "pid": os.getpid(), "aug": get_rng().random(),
                "legacy": np.random.random()}


class FailingDataset(IndexDataset):
    """Raises ValueError at index ``bad``."""

    def __init__(self, n, bad):
        super().__init__(n)
        self.bad = bad

    def __getitem__(self, i):
        if i == self.bad:
            raise ValueError(f"sample {i} is corrupt")
        return super().__getitem__(i)


class SuicideDataset(IndexDataset):
    """The worker that reads index ``bad`` kills itself with SIGKILL (as the OOM killer
    would)."""

    def __init__(self, n, bad):
        super().__init__(n)
        self.bad = bad

    def __getitem__(self, i):
        if i == self.bad:
            os.kill(os.getpid(), signal.SIGKILL)
        return super().__getitem__(i)


class SlowDataset(IndexDataset):
    """Every sample takes ``delay`` seconds."""

    def __init__(self, n, delay):
        super().__init__(n)
        self.delay = delay

    def __getitem__(self, i):
        time.sleep(self.delay)
        return super().__getitem__(i)


class BigDataset(Dataset):
    """Samples of ``size`` float64 values filled with their index (megabytes per batch)."""

    def __init__(self, n, size):
        self.n, self.size = n, size

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return np.full(self.size, i, dtype=np.float64), np.int32(i), f"name-{i}"


class ShardedStream(IterableDataset):
    """0 .. n-1, split between workers with get_worker_info (each value once)."""

    def __init__(self, n):
        self.n = n

    def __iter__(self):
        info = get_worker_info()
        start, step = (0, 1) if info is None else (info.id, info.num_workers)
        for i in range(start, self.n, step):
            yield {"value": i, "worker": -1 if info is None else info.id}


class UnpicklableBatch(Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        return {"fn": lambda: i}


def record_worker_id(worker_id):
    """A worker_init_fn: leaves a mark that InitMarkDataset returns."""
    os.environ["LEZERO_TEST_WORKER_INIT"] = str(worker_id)


def failing_init(worker_id):
    raise RuntimeError(f"init failed in worker {worker_id}")


class InitMarkDataset(IndexDataset):
    def __getitem__(self, i):
        return int(os.environ.get("LEZERO_TEST_WORKER_INIT", "-1")), get_worker_info().id


def process_gone(pid):
    """True when ``pid`` no longer runs (absent from /proc, or a zombie)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state == "Z"


def our_segments():
    """Shared-memory segments made by loaders of this process."""
    prefix = f"lz{os.getpid():x}_"
    try:
        return [n for n in os.listdir("/dev/shm") if n.startswith(prefix)]
    except FileNotFoundError:
        return []


def flatten_indices(batches):
    return [int(i) for b in batches for i in np.atleast_1d(b["index"])]
