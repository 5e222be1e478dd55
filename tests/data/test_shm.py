"""Batches handed over through shared memory as views: a slot the user still holds is never
written again, and nothing is left in /dev/shm."""
import gc
import os
import pickle

import numpy as np
import pytest

from lezero.data import DataLoader, _shm
from lezero.data._shm import MAX_HELD, SlotReader, SlotWriter, new_prefix
from tests.data import _helpers as H

pytestmark = pytest.mark.timeout(60)

needs_dev_shm = pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="lists /dev/shm")


def segments(prefix):
    return [n for n in os.listdir("/dev/shm") if n.startswith(prefix)]


def in_shared_memory(a):
    """True when ``a`` views a slot (its memory's owner is the batch's lease)."""
    while isinstance(a, np.ndarray):
        a = a.base
    return a is not None and not isinstance(a, (bytes, bytearray))


@pytest.fixture
def pair():
    """A worker's writer and the main process's reader for one worker, 2 batches ahead."""
    prefix = new_prefix()
    writer, reader = SlotWriter(prefix, 0), SlotReader(prefix, 1, 2)
    yield writer, reader
    writer.close()
    reader.close()
    if os.path.isdir("/dev/shm"):
        assert segments(prefix) == []


def hand_over(writer, reader, batch):
    """What a worker and the main process do for one batch: slot, write, read."""
    slot = reader.take(0)
    return slot, reader.read(0, slot, writer.write(slot, batch))


def test_description_is_small_and_batch_round_trips_as_views(pair):
    writer, reader = pair
    big = np.random.default_rng(0).random((512, 1024))          # 4 MiB
    batch = {"x": big, "y": (np.arange(3), "label"), "n": 7}
    slot = reader.take(0)
    desc = writer.write(slot, batch)
    assert len(pickle.dumps(desc)) < 1000               # the arrays are not in the message
    out = reader.read(0, slot, desc)
    np.testing.assert_array_equal(out["x"], big)
    assert out["y"][1] == "label" and out["n"] == 7
    assert in_shared_memory(out["x"]) and in_shared_memory(out["y"][0])    # no copy
    out["x"][0, 0] = -1                                 # the user's to change


def test_a_held_slot_is_not_reused_until_every_view_is_dropped(pair):
    writer, reader = pair
    slot, first = hand_over(writer, reader, np.full((64, 64), 1.0))
    tail = first[60:, ::2]                              # a view outlives the batch array
    del first
    for k in range(2, 8):                               # more batches, held slot untouched
        other, batch = hand_over(writer, reader, np.full((64, 64), float(k)))
        assert other != slot
        np.testing.assert_array_equal(batch, k)
        del batch
    np.testing.assert_array_equal(tail, 1.0)
    del tail                                            # now the slot is free again
    assert reader.take(0) == slot
    reader.discard(0, slot)


def test_more_held_batches_than_max_held_are_copies(pair):
    writer, reader = pair
    held = [hand_over(writer, reader, np.full(1000, k))[1] for k in range(MAX_HELD + 3)]
    assert [in_shared_memory(b) for b in held] == [True] * MAX_HELD + [False] * 3
    for k, b in enumerate(held):
        np.testing.assert_array_equal(b, k)
    assert len(writer.segments) <= 2 + MAX_HELD         # prefetch + held: bounded memory


def test_a_growing_slot_gets_a_new_segment_and_keeps_the_data(pair):
    writer, reader = pair
    small = np.arange(100.0)
    slot, out = hand_over(writer, reader, small)
    name = writer.segments[slot].name
    del out
    big = np.arange(1e6)
    assert reader.take(0) == slot
    desc = writer.write(slot, big)
    assert desc[0] != name
    np.testing.assert_array_equal(reader.read(0, slot, desc), big)


def test_a_new_slot_is_sized_like_the_others_so_collate_fills_it_in_place(pair):
    writer, reader = pair
    _, a = hand_over(writer, reader, np.zeros(10_000))
    size = writer.segments[0].size
    arena = writer.arena(1)                             # slot 1 seen for the first time
    assert writer.segments[1].size == size and arena.segment is writer.segments[1]


def test_without_posix_shared_memory_batches_are_copied(pair, monkeypatch):
    monkeypatch.setattr(_shm, "_posixshmem", None)      # as on Windows
    writer, reader = pair
    slot, out = hand_over(writer, reader, np.arange(1000.0))
    np.testing.assert_array_equal(out, np.arange(1000.0))
    assert not in_shared_memory(out)
    assert reader.take(0) == slot                       # free at once: nothing is held
    reader.discard(0, slot)


@needs_dev_shm
def test_a_held_batch_outlives_the_reader_and_leaves_no_segment():
    prefix = new_prefix()
    writer, reader = SlotWriter(prefix, 0), SlotReader(prefix, 1, 2)
    _, batch = hand_over(writer, reader, np.arange(50_000.0))
    writer.close()                                      # the worker exits ...
    reader.close()                                      # ... and the iterator shuts down
    assert segments(prefix) == []                       # unlinked ...
    np.testing.assert_array_equal(batch, np.arange(50_000.0))    # ... but still mapped


# ----- through the DataLoader ----------------------------------------------------------------

def expected(n, batch_size):
    loader = DataLoader(H.BigDataset(n, 1000), batch_size=batch_size, seed=0)
    return [x.copy() for x, _, _ in loader]


def test_kept_batches_equal_single_process_batches():
    want = expected(40, 4)
    loader = DataLoader(H.BigDataset(40, 1000), batch_size=4, num_workers=2, seed=0)
    got = [x for x, _, _ in loader]                     # every batch kept
    assert len(got) == len(want)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
    assert sum(in_shared_memory(x) for x in got) == 2 * MAX_HELD    # the rest were copied
    del got, loader
    gc.collect()
    assert H.our_segments() == []


def test_a_training_loop_gets_views_and_its_previous_batch_stays_intact():
    want = expected(48, 4)
    loader = DataLoader(H.BigDataset(48, 1000), batch_size=4, num_workers=2, seed=0,
                        prefetch_factor=2)
    previous = None
    for k, (x, _, _) in enumerate(loader):
        assert in_shared_memory(x)                      # steady state: never a copy
        np.testing.assert_array_equal(x, want[k])
        if previous is not None:                        # e.g. kept alive by a graph
            np.testing.assert_array_equal(previous, want[k - 1] + 1000.0)
        x += 1000.0                                     # writing into a batch is allowed
        previous = x
    np.testing.assert_array_equal(previous, want[-1] + 1000.0)


def test_persistent_workers_keep_held_batches_across_epochs():
    loader = DataLoader(H.BigDataset(24, 1000), batch_size=4, num_workers=2, seed=0,
                        persistent_workers=True)
    kept = [next(iter(loader))[0] for _ in range(3)]    # three epochs left early
    for _ in range(2):
        for _ in loader:
            pass
    for x in kept:
        np.testing.assert_array_equal(x[:, 0], [0, 1, 2, 3])
    del loader
    gc.collect()
    assert H.our_segments() == []
    np.testing.assert_array_equal(kept[0][:, -1], [0, 1, 2, 3])
