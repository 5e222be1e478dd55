"""DataLoader workers under failure (issue 32): a batch that cannot be pickled, a dead or
hung worker, a failing collate_fn or sampler, ``sys.exit`` in a dataset.

What must hold: a failure that belongs to one batch is raised for that batch (naming it,
with the worker's traceback) and the epoch goes on in order; a failure that breaks the
pool (a dead worker, a timeout) raises on every later ``next`` (never a silent
StopIteration); no process or shared-memory segment is left behind.
"""
import os
import signal
import sys
import time

import numpy as np
import pytest

from lezero.data import DataLoader, Dataset, TensorDataset
from tests.data import _helpers as H
from tests.data.test_workers import assert_clean, data_workers

pytestmark = pytest.mark.timeout(60)


class _ReduceRaises:
    def __reduce__(self):
        raise ValueError("this object refuses to be pickled")


def _unpickle_fails():
    raise RuntimeError("this object refuses to be rebuilt")


class _RebuildRaises:
    def __reduce__(self):
        return (_unpickle_fails, ())


class ObjectDataset(Dataset):
    """Sample i is ``{"index": i, "pid": worker pid, "obj": ...}``; at index ``bad`` the
    object is ``make()`` (something that does not cross a pipe)."""

    def __init__(self, n, bad, make):
        self.n, self.bad, self.make = n, bad, make

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return {"index": i, "pid": os.getpid(), "obj": self.make() if i == self.bad else i}


def keep_objects(samples):
    """A collate_fn that stacks the numbers and keeps the objects as they are."""
    return {"index": np.array([s["index"] for s in samples]),
            "pid": np.array([s["pid"] for s in samples]),
            "obj": [s["obj"] for s in samples]}


def _lambda():
    return lambda: 0


def run_epoch(it):
    """Every batch of the rest of the epoch, or the exception (type, message) it raised."""
    out = []
    while True:
        try:
            out.append(next(it))
        except StopIteration:
            return out
        except Exception as e:
            out.append((type(e), str(e)))


@pytest.mark.parametrize("num_workers", [1, 2])
@pytest.mark.parametrize("make, exc_type, culprit", [
    (_ReduceRaises, ValueError, "_ReduceRaises"),
    (_lambda, Exception, "function")])
def test_a_sample_that_cannot_be_pickled_fails_its_batch_only(num_workers, make, exc_type,
                                                               culprit):
    loader = DataLoader(ObjectDataset(10, bad=5, make=make), batch_size=2,
                        num_workers=num_workers, collate_fn=keep_objects, seed=0)
    out = run_epoch(iter(loader))
    assert len(out) == 5
    kind, msg = out[2]                             # batch 2 holds index 5
    assert issubclass(kind, exc_type)
    assert f"DataLoader worker {2 % num_workers}" in msg
    assert "while sending batch 2 (indices [4, 5]) to the main process" in msg
    assert f"batch['obj'][1]: {culprit}" in msg and "Original traceback" in msg
    good = [b for k, b in enumerate(out) if k != 2]
    assert [b["index"].tolist() for b in good] == [[0, 1], [2, 3], [6, 7], [8, 9]]
    # worker 0 failed to send batch 2 and lived on: it built batch 2 + num_workers too
    assert set(out[0]["pid"].tolist()) == set(out[2 + num_workers]["pid"].tolist())
    assert_clean()


@pytest.mark.parametrize("num_workers", [1, 2])
def test_a_batch_the_main_process_cannot_unpickle_fails_alone(num_workers):
    # prefetch_factor=1: a lost batch would leave nothing in flight and end the epoch early
    loader = DataLoader(ObjectDataset(8, bad=2, make=_RebuildRaises), batch_size=2,
                        num_workers=num_workers, prefetch_factor=1, collate_fn=keep_objects,
                        seed=0)
    out = run_epoch(iter(loader))
    assert len(out) == 4
    kind, msg = out[1]
    assert kind is RuntimeError
    assert "in the main process while unpickling batch 1 from DataLoader worker" in msg
    assert "this object refuses to be rebuilt" in msg
    assert [b["index"].tolist() for k, b in enumerate(out) if k != 1] == [[0, 1], [4, 5],
                                                                           [6, 7]]
    assert_clean()


class KillOnce(H.IndexDataset):
    """The worker that reads index ``bad`` kills itself with SIGKILL, the first time only
    (a marker file remembers), as an out-of-memory kill would."""

    def __init__(self, n, bad, marker):
        super().__init__(n)
        self.bad, self.marker = bad, marker

    def __getitem__(self, i):
        if i == self.bad and not os.path.exists(self.marker):
            open(self.marker, "w").close()
            os.kill(os.getpid(), signal.SIGKILL)
        return super().__getitem__(i)


@pytest.mark.parametrize("num_workers", [1, 2])
def test_after_a_worker_died_every_next_raises_again(num_workers, tmp_path):
    loader = DataLoader(KillOnce(12, bad=5, marker=str(tmp_path / "killed")), batch_size=2,
                        num_workers=num_workers, seed=0)
    it = iter(loader)
    assert next(it)["index"].tolist() == [0, 1]
    pattern = r"DataLoader worker \d \(pid \d+\) exited unexpectedly \(killed by signal " \
              r"SIGKILL\)"
    with pytest.raises(RuntimeError, match=pattern) as first:
        for _ in range(5):
            next(it)
    for _ in range(3):                               # broken for good, never StopIteration
        with pytest.raises(RuntimeError) as again:
            next(it)
        assert str(again.value) == str(first.value)
    assert_clean()
    # a new epoch starts new workers (the marker spares index 5 this time)
    assert H.flatten_indices(list(loader)) == list(range(12))
    assert_clean()


def test_a_persistent_loader_recovers_from_a_dead_worker_at_the_next_epoch(tmp_path):
    loader = DataLoader(KillOnce(8, bad=3, marker=str(tmp_path / "killed")), batch_size=2,
                        num_workers=2, persistent_workers=True, seed=0)
    it = iter(loader)
    with pytest.raises(RuntimeError, match="exited unexpectedly"):
        list(it)
    with pytest.raises(RuntimeError, match="exited unexpectedly"):
        next(it)
    assert H.flatten_indices(list(loader)) == list(range(8))
    del it, loader
    assert_clean()


@pytest.mark.timeout(30)
@pytest.mark.parametrize("num_workers", [1, 2])
def test_a_hung_worker_is_stopped_by_timeout_and_the_iterator_stays_broken(num_workers):
    loader = DataLoader(H.SlowDataset(8, delay=60), batch_size=2, num_workers=num_workers,
                        timeout=0.5, seed=0)
    it = iter(loader)
    pids = [p.pid for p in data_workers()]
    start = time.monotonic()
    with pytest.raises(RuntimeError, match=r"timed out after 0.5 s waiting for batch 0 "
                                           r"from worker 0 \(pid \d+\)"):
        next(it)
    assert time.monotonic() - start < 10     # 0.5 s, then the grace period and SIGTERM
    with pytest.raises(RuntimeError, match="timed out after 0.5 s"):
        next(it)
    assert_clean(pids)


def test_segments_of_a_crashed_worker_are_removed():
    # Batches 0-3 make each worker create segments; worker 0 then dies on batch 4.
    loader = DataLoader(H.SuicideDataset(40, bad=8), batch_size=2, num_workers=2, seed=0)
    it = iter(loader)
    for _ in range(3):
        next(it)
    assert H.our_segments() != []          # the workers' slots exist in /dev/shm
    with pytest.raises(RuntimeError, match="exited unexpectedly"):
        list(it)
    assert H.our_segments() == []
    assert_clean()


def collate_fails_on_batch_with_7(samples):
    if any(s["index"] == 7 for s in samples):
        raise ValueError("collate cannot take index 7")
    return {"index": np.array([s["index"] for s in samples])}


@pytest.mark.parametrize("num_workers", [1, 2])
def test_a_collate_fn_error_names_its_batch_and_the_epoch_goes_on(num_workers):
    loader = DataLoader(H.IndexDataset(10), batch_size=2, num_workers=num_workers,
                        collate_fn=collate_fails_on_batch_with_7, seed=0)
    out = run_epoch(iter(loader))
    kind, msg = out[3]
    assert kind is ValueError and "collate cannot take index 7" in msg
    assert "while building batch 3 (indices [6, 7])" in msg
    assert "collate_fails_on_batch_with_7" in msg
    assert [b["index"].tolist() for k, b in enumerate(out) if k != 3] == [[0, 1], [2, 3],
                                                                           [4, 5], [8, 9]]
    assert_clean()


@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_sampler_index_out_of_range_fails_its_batch(num_workers):
    ds = TensorDataset(np.arange(6))
    loader = DataLoader(ds, batch_sampler=[[0, 1], [2, 600], [4, 5]],
                        num_workers=num_workers)
    it = iter(loader)
    assert next(it)[0].tolist() == [0, 1]
    with pytest.raises(IndexError, match="600") as info:
        next(it)
    if num_workers:
        assert "while building batch 1 (indices [2, 600])" in str(info.value)
    assert next(it)[0].tolist() == [4, 5]
    with pytest.raises(StopIteration):
        next(it)
    assert_clean()


def test_indices_that_cannot_be_sent_to_a_worker_are_a_type_error():
    loader = DataLoader(H.IndexDataset(4), batch_sampler=[[0, 1], [2, lambda: 3]],
                        num_workers=1)
    with pytest.raises(TypeError, match=r"cannot send batch 1 \(indices \[2, <function"):
        list(loader)
    assert_clean()


class ExitingDataset(H.IndexDataset):
    def __getitem__(self, i):
        if i == 3:
            sys.exit(3)
        return super().__getitem__(i)


def test_sys_exit_in_a_dataset_fails_its_batch_not_the_worker():
    loader = DataLoader(ExitingDataset(6), batch_size=2, num_workers=1, seed=0)
    out = run_epoch(iter(loader))
    kind, msg = out[1]
    assert kind is RuntimeError          # not SystemExit: that would end the main process
    assert "Caught SystemExit in DataLoader worker 0" in msg
    assert "while building batch 1 (indices [2, 3])" in msg
    assert [b["index"].tolist() for k, b in enumerate(out) if k != 1] == [[0, 1], [4, 5]]
    assert len({int(p) for k, b in enumerate(out) if k != 1 for p in b["pid"]}) == 1
    assert_clean()
