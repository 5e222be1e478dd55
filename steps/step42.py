"""Step 42: the DataLoader: batches, shuffling, and worker processes.

``DataLoader(dataset, batch_size, shuffle, num_workers, seed)`` stacks samples into NumPy
batches.  With ``num_workers > 0`` worker processes build batches ahead of time and hand
them back through shared memory.  Everything random (the order, and whatever transforms
draw from ``lezero.data.get_rng()``) comes from ``seed``, so the batches are the same
whatever the number of workers.  A worker's exception reaches the main process with its
traceback; leaving a loop early stops the workers.
Run: python steps/step42.py
"""
import multiprocessing
import os
import time

import numpy as np

from lezero.data import DataLoader, Dataset, get_rng


class NoisyRange(Dataset):
    """Sample i is (i, noise, pid): the noise is an 'augmentation' drawn per batch."""

    def __init__(self, n, delay=0.0, corrupt=None):
        self.n, self.delay, self.corrupt = n, delay, corrupt

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.delay:
            time.sleep(self.delay)           # stands in for decoding a file
        if i == self.corrupt:
            raise ValueError("sample 13 is corrupt")
        return i, get_rng().normal(), os.getpid()


def run(num_workers, **kw):
    loader = DataLoader(NoisyRange(20), batch_size=6, shuffle=True, seed=47,
                        num_workers=num_workers, **kw)
    return [(idx.tolist(), noise.round(4).tolist(), set(pid.tolist()))
            for idx, noise, pid in loader]


if __name__ == "__main__":
    single = run(0)
    print("batches of indices (num_workers=0):", [b[0] for b in single])
    for w in (1, 2):
        multi = run(w)
        same = [b[:2] for b in multi] == [b[:2] for b in single]
        pids = set().union(*(b[2] for b in multi))
        print(f"num_workers={w}: same indices and noise as 0 workers: {same}; "
              f"built by {len(pids)} process(es) other than this one: {os.getpid() not in pids}")

    loader = DataLoader(NoisyRange(20), batch_size=6, shuffle=True, seed=47)
    first, second = [b[0].tolist() for b in loader], [b[0].tolist() for b in loader]
    print("a second pass is a new epoch, a new order:", first != second,
          "| same samples:", sorted(sum(first, [])) == sorted(sum(second, [])) == list(range(20)))

    # Workers overlap slow reads: 64 samples of 10 ms each.
    for w in (0, 2):
        slow = DataLoader(NoisyRange(64, delay=0.01), batch_size=4, num_workers=w)
        t0 = time.perf_counter()
        n = sum(len(b[0]) for b in slow)
        print(f"  {n} slow samples with {w} workers: {time.perf_counter() - t0:.2f} s")

    # A failing sample: the worker's traceback comes with the error.
    try:
        for batch in DataLoader(NoisyRange(20, corrupt=13), batch_size=4, num_workers=2):
            pass
    except ValueError as e:
        lines = str(e).splitlines()
        print("worker error reached the main process:", lines[0])
        print("  ...", lines[-1])

    # Leaving early: the workers are gone as soon as the loop is.
    for k, batch in enumerate(DataLoader(NoisyRange(20), batch_size=2, num_workers=2)):
        if k == 1:
            break
    print("worker processes left after break:", len(multiprocessing.active_children()))
