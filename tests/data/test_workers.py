"""DataLoader with worker processes: completeness, reproducibility, failures, clean-up."""
import gc
import multiprocessing
import os
import signal
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lezero as lz
from lezero.data import DataLoader, get_worker_info, variable_collate
from tests.data import _helpers as H

pytestmark = pytest.mark.timeout(60)


def batches_of(loader):
    return [b for b in loader]


def data_workers():
    """This process's live DataLoader workers (other tests' children are not ours)."""
    return [p for p in multiprocessing.active_children()
            if p.name.startswith("lezero-data-worker")]


def assert_clean(pids=(), collect=True):
    """No worker process and no shared-memory segment of ours is left.

    ``collect``: first let the garbage collector free iterators that a caught exception's
    traceback kept alive (tests of early exits pass False: there it must be immediate)."""
    if collect:
        gc.collect()
    assert data_workers() == []
    for pid in pids:
        assert H.process_gone(pid), f"worker {pid} still runs"
    assert H.our_segments() == []


# 20 examples start up to 40 worker processes; under `make test`'s coverage each one also
# starts the tracer and writes its own data file, so this test gets more than the
# module's 60 s on a loaded machine (it took over 60 s there once).
@pytest.mark.timeout(150)
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(0, 40), batch_size=st.integers(1, 7), drop_last=st.booleans(),
       num_workers=st.integers(0, 2), shuffle=st.booleans(), prefetch=st.integers(1, 3))
def test_each_index_exactly_once_per_epoch(n, batch_size, drop_last, num_workers, shuffle,
                                           prefetch):
    loader = DataLoader(H.IndexDataset(n), batch_size=batch_size, shuffle=shuffle,
                        num_workers=num_workers, drop_last=drop_last, seed=1,
                        prefetch_factor=prefetch)
    for _ in range(2):                         # iterating again is a new, complete epoch
        batches = batches_of(loader)
        seen = H.flatten_indices(batches)
        kept = n - n % batch_size if drop_last else n
        assert sorted(seen) == sorted(set(seen))               # nothing twice
        assert len(seen) == kept and set(seen) <= set(range(n))
        assert len(batches) == len(loader)
        sizes = [len(b["index"]) for b in batches]
        assert all(s == batch_size for s in sizes[:-1])        # only the last may be short
        assert not sizes or 0 < sizes[-1] <= batch_size
        assert not (drop_last and sizes and sizes[-1] != batch_size)
    assert_clean()


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(1, 30), batch_size=st.integers(1, 6), drop_last=st.booleans(),
       shuffle=st.booleans(), seed=st.integers(0, 2**63 - 1))
def test_property_same_order_for_a_seed_across_worker_counts(n, batch_size, drop_last,
                                                             shuffle, seed):
    runs = []
    for w in (0, 1, 2):
        loader = DataLoader(H.IndexDataset(n), batch_size=batch_size, drop_last=drop_last,
                            shuffle=shuffle, num_workers=w, seed=seed)
        runs.append([(b["index"].tolist(), b["aug"].tolist()) for b in loader])
    assert runs[0] == runs[1] == runs[2]


@pytest.mark.parametrize("shuffle", [False, True])
def test_same_seed_same_batches_whatever_num_workers(shuffle):
    def run(num_workers):
        loader = DataLoader(H.IndexDataset(45), batch_size=4, shuffle=shuffle,
                            num_workers=num_workers, seed=123)
        return [batches_of(loader) for _ in range(2)]           # two epochs

    ref = run(0)
    for w in (1, 2):
        got = run(w)
        for epoch_ref, epoch_got in zip(ref, got):
            assert len(epoch_ref) == len(epoch_got)
            for a, b in zip(epoch_ref, epoch_got):
                np.testing.assert_array_equal(a["index"], b["index"])
                np.testing.assert_array_equal(a["aug"], b["aug"])   # augmentation too
    # epochs differ from each other, and a different seed differs
    assert not np.array_equal(ref[0][0]["aug"], ref[1][0]["aug"])
    other = batches_of(DataLoader(H.IndexDataset(45), batch_size=4, shuffle=shuffle, seed=7))
    assert not np.array_equal(ref[0][0]["aug"], other[0]["aug"])


def test_workers_have_distinct_random_streams():
    loader = DataLoader(H.IndexDataset(8), batch_size=2, num_workers=2, seed=0)
    batches = batches_of(loader)
    by_pid = {}
    for b in batches:
        by_pid.setdefault(int(b["pid"][0]), []).extend(b["legacy"].tolist())
    assert len(by_pid) == 2
    first, second = by_pid.values()
    assert not set(first) & set(second)        # no duplicated draws across workers
    aug = np.concatenate([b["aug"] for b in batches])
    assert len(set(aug.tolist())) == len(aug)


def test_seed_none_follows_lz_manual_seed():
    def run():
        lz.manual_seed(42)
        loader = DataLoader(H.IndexDataset(20), batch_size=5, shuffle=True, num_workers=2)
        return batches_of(loader)

    a, b = run(), run()
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x["index"], y["index"])
        np.testing.assert_array_equal(x["aug"], y["aug"])


def test_large_batches_cross_shared_memory_intact():
    ds = H.BigDataset(24, 40_000)                  # 320 KB per sample, ~1.3 MB per batch
    loader = DataLoader(ds, batch_size=4, num_workers=2, seed=0)
    for k, (x, idx, names) in enumerate(loader):
        assert x.shape == (4, 40_000) and x.dtype == np.float64
        np.testing.assert_array_equal(x[:, 0], idx)
        np.testing.assert_array_equal(x[:, -1], idx)
        assert idx.dtype == np.int32 and names == [f"name-{i}" for i in idx]
        assert x.flags.owndata or x.base is not None     # a real array the user may keep
    kept = next(iter(loader))[0]
    for _ in loader:                                    # later batches must not overwrite it
        pass
    np.testing.assert_array_equal(kept[:, 0], [0, 1, 2, 3])
    assert_clean()


def test_batches_grow_between_epochs():
    loader = DataLoader(H.BigDataset(12, 100), batch_size=4, num_workers=1, seed=0,
                        persistent_workers=True)
    batches_of(loader)
    loader.dataset.size = 50_000                        # workers share it (fork): bigger batch
    loader2 = DataLoader(H.BigDataset(12, 50_000), batch_size=4, num_workers=1, seed=0)
    x, _, _ = next(iter(loader2))
    assert x.shape == (4, 50_000)
    del loader, loader2
    assert_clean()


def test_worker_exception_reraised_with_traceback():
    loader = DataLoader(H.FailingDataset(20, bad=9), batch_size=4, num_workers=2, seed=0)
    it = iter(loader)
    got = [next(it), next(it)]                     # batches 0 and 1 are fine
    with pytest.raises(ValueError) as info:
        next(it)                                   # batch 2 holds index 9
    msg = str(info.value)
    assert "sample 9 is corrupt" in msg
    assert "DataLoader worker" in msg and "Original traceback" in msg
    assert "in __getitem__" in msg and "_helpers.py" in msg
    # like PyTorch, the iterator goes on after a failed batch
    rest = list(it)
    assert H.flatten_indices(got + rest) == [i for i in range(20) if not 8 <= i < 12]
    assert_clean()


def test_a_loop_ended_by_a_worker_error_releases_the_workers_at_once():
    gc.disable()                    # prove it needs no garbage-collection pass
    try:
        with pytest.raises(ValueError, match="sample 5 is corrupt"):
            for _ in DataLoader(H.FailingDataset(20, bad=5), batch_size=2, num_workers=2):
                pass
        assert_clean(collect=False)
    finally:
        gc.enable()


def test_worker_init_fn_runs_in_each_worker_and_its_error_surfaces():
    loader = DataLoader(H.InitMarkDataset(6), batch_size=None, num_workers=2, seed=0,
                        worker_init_fn=H.record_worker_id)
    marks = batches_of(loader)
    assert all(mark == wid for mark, wid in marks)
    assert {wid for _, wid in marks} == {0, 1}
    bad = DataLoader(H.IndexDataset(6), batch_size=2, num_workers=1,
                     worker_init_fn=H.failing_init)
    with pytest.raises(RuntimeError, match="init failed in worker 0"):
        next(iter(bad))
    assert_clean()


def test_killed_worker_is_reported_not_waited_on():
    loader = DataLoader(H.SuicideDataset(40, bad=13), batch_size=2, num_workers=2, seed=0)
    with pytest.raises(RuntimeError, match=r"worker \d \(pid \d+\) exited unexpectedly "
                                           r"\(killed by signal SIGKILL\)"):
        for _ in loader:
            pass
    assert_clean()


@pytest.mark.timeout(30)
def test_worker_killed_from_outside_while_main_waits():
    loader = DataLoader(H.SlowDataset(10, delay=30), batch_size=1, num_workers=1, seed=0)
    it = iter(loader)
    pids = [p.pid for p in data_workers()]
    assert len(pids) == 1
    os.kill(pids[0], signal.SIGKILL)              # the worker is asleep in __getitem__
    with pytest.raises(RuntimeError, match="exited unexpectedly"):
        next(it)
    assert_clean(pids)


def test_timeout_raises():
    loader = DataLoader(H.SlowDataset(4, delay=20), batch_size=1, num_workers=1,
                        timeout=0.3, seed=0)
    with pytest.raises(RuntimeError, match=r"timed out after 0.3 s"):
        next(iter(loader))
    assert_clean()


def test_early_break_leaves_no_process_or_segment():
    loader = DataLoader(H.SlowDataset(200, delay=0.01), batch_size=2, num_workers=2, seed=0)
    pids = set()
    for k, batch in enumerate(loader):
        pids.update(batch["pid"].tolist())
        if k == 2:
            break
    assert len(pids) == 2
    assert_clean(pids, collect=False)


def test_deleting_the_iterator_shuts_workers_down():
    loader = DataLoader(H.IndexDataset(100), batch_size=2, num_workers=2, seed=0)
    it = iter(loader)
    pids = set(next(it)["pid"].tolist()) | set(next(it)["pid"].tolist())
    assert len(data_workers()) == 2
    del it
    assert_clean(pids, collect=False)


def test_persistent_workers_survive_epochs_and_die_with_the_loader():
    loader = DataLoader(H.IndexDataset(12), batch_size=3, num_workers=2, seed=0,
                        persistent_workers=True, shuffle=True)
    epoch1 = batches_of(loader)
    pids1 = {p.pid for p in data_workers()}
    it = iter(loader)
    next(it)                                        # leave the epoch early ...
    epoch2 = batches_of(loader)                     # ... and start a new one
    pids2 = {p.pid for p in data_workers()}
    assert pids1 == pids2 and len(pids1) == 2
    assert sorted(H.flatten_indices(epoch1)) == sorted(H.flatten_indices(epoch2)) == \
        list(range(12))
    assert H.flatten_indices(epoch1) != H.flatten_indices(epoch2)    # a new order
    del it, loader
    assert_clean(pids1, collect=False)


def test_iterable_dataset_sharded_by_worker_info():
    for w in (0, 1, 2):
        loader = DataLoader(H.ShardedStream(23), batch_size=4, num_workers=w)
        batches = batches_of(loader)
        values = sorted(int(v) for b in batches for v in b["value"])
        assert values == list(range(23))
        if w == 2:
            assert {int(x) for b in batches for x in b["worker"]} == {0, 1}
    assert get_worker_info() is None
    assert_clean()


def test_unpicklable_batch_is_an_error_not_a_hang():
    loader = DataLoader(H.UnpicklableBatch(), batch_size=2, num_workers=1,
                        collate_fn=lambda samples: samples)
    with pytest.raises(Exception, match="DataLoader worker 0"):
        next(iter(loader))
    assert_clean()


@pytest.mark.timeout(120)
def test_spawn_start_method_gives_the_same_batches():
    ref = batches_of(DataLoader(H.IndexDataset(10), batch_size=3, shuffle=True, seed=5))
    got = batches_of(DataLoader(H.IndexDataset(10), batch_size=3, shuffle=True, seed=5,
                                num_workers=2, multiprocessing_context="spawn"))
    for a, b in zip(ref, got):
        np.testing.assert_array_equal(a["index"], b["index"])
        np.testing.assert_array_equal(a["aug"], b["aug"])
    assert len(ref) == len(got) == 4
    assert_clean()


def test_variable_collate_through_workers():
    ds = H.BigDataset(6, 3)
    batches = list(DataLoader(ds, batch_size=3, num_workers=1, collate_fn=variable_collate))
    x, idx, names = batches[1]
    assert isinstance(x, lz.Variable) and not x.requires_grad and x.shape == (3, 3)
    np.testing.assert_array_equal(x.data[:, 0], [3, 4, 5])
    assert isinstance(idx, lz.Variable) and names == ["name-3", "name-4", "name-5"]
    assert_clean()
