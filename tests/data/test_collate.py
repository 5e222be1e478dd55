"""Collate functions and the single-process DataLoader, against PyTorch."""
import collections

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lezero as lz
from lezero.data import (DataLoader, PadCollate, TensorDataset, default_collate, pad_sequence,
                         variable_collate)
from lezero.data._shm import SlotReader, SlotWriter, new_prefix

torch = pytest.importorskip("torch")
tdata = torch.utils.data

Point = collections.namedtuple("Point", "x y")


def as_numpy(obj):
    """Torch's batch with tensors turned into arrays, for comparison."""
    if isinstance(obj, torch.Tensor):
        return obj.numpy()
    if isinstance(obj, dict):
        return {k: as_numpy(v) for k, v in obj.items()}
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*(as_numpy(v) for v in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(as_numpy(v) for v in obj)
    return obj


def assert_same(ours, theirs):
    assert type(ours) is type(theirs), (type(ours), type(theirs))
    if isinstance(ours, np.ndarray):
        np.testing.assert_allclose(ours, theirs, rtol=1e-6)
        assert ours.shape == theirs.shape
    elif isinstance(ours, dict):
        assert ours.keys() == theirs.keys()
        for k in ours:
            assert_same(ours[k], theirs[k])
    elif isinstance(ours, (list, tuple)):
        assert len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            assert_same(a, b)
    else:
        assert ours == theirs


@pytest.mark.parametrize("samples", [
    [np.arange(3, dtype=np.float32), np.ones(3, np.float32)],
    [(np.zeros((2, 2)), 1, 0.5), (np.ones((2, 2)), 2, 1.5)],
    [{"a": np.int16(3), "b": [1, 2], "s": "x"}, {"a": np.int16(4), "b": [3, 4], "s": "y"}],
    [Point(1.0, np.arange(2)), Point(2.0, np.arange(2) + 5)],
    [[True, 3], [False, 4]],
])
def test_default_collate_matches_torch(samples):
    ours = default_collate(samples)
    theirs = as_numpy(tdata.default_collate(samples))
    assert_same(ours, theirs)


def test_default_collate_dtypes():
    assert default_collate([1.0, 2.0]).dtype == np.float32     # LeZero's float, not float64
    assert default_collate([1, 2]).dtype == np.int64
    assert default_collate([True, False]).dtype == np.bool_
    assert default_collate([np.float16(1), np.float16(2)]).dtype == np.float16
    assert default_collate([np.zeros(2, np.uint8)] * 3).dtype == np.uint8
    v = default_collate([lz.Variable(np.ones(2)), lz.Variable(np.zeros(2))])
    assert isinstance(v, lz.Variable) and v.shape == (2, 2) and not v.requires_grad


def test_default_collate_errors_name_the_problem():
    with pytest.raises(ValueError, match=r"different shapes, \(3,\) at position 0 and \(4,\) "
                                         r"at position 2"):
        default_collate([np.zeros(3), np.zeros(3), np.zeros(4)])
    with pytest.raises(ValueError, match="different keys"):
        default_collate([{"a": 1}, {"b": 1}])
    with pytest.raises(ValueError, match="different numbers of fields"):
        default_collate([(1, 2), (1,)])
    with pytest.raises(TypeError, match="found object"):
        default_collate([object(), object()])
    with pytest.raises(ValueError, match="empty batch"):
        default_collate([])


def test_variable_collate_wraps_arrays():
    x, names = variable_collate([(np.ones(2, np.float32), "a"), (np.zeros(2, np.float32), "b")])
    assert isinstance(x, lz.Variable) and x.shape == (2, 2) and not x.requires_grad
    assert names == ["a", "b"]


def test_pad_collate_pads_and_masks():
    seqs = [np.array([1, 2, 3]), np.array([4]), np.array([5, 6])]
    padded, mask, labels = PadCollate(padding_value=-1)([(s, k) for k, s in enumerate(seqs)])
    np.testing.assert_array_equal(padded, [[1, 2, 3], [4, -1, -1], [5, 6, -1]])
    np.testing.assert_array_equal(mask, [[1, 1, 1], [1, 0, 0], [1, 1, 0]])
    np.testing.assert_array_equal(labels, [0, 1, 2])
    ref = torch.nn.utils.rnn.pad_sequence([torch.from_numpy(s) for s in seqs],
                                          batch_first=False, padding_value=-1).numpy()
    np.testing.assert_array_equal(pad_sequence(seqs, batch_first=False, padding_value=-1), ref)
    feats = [np.ones((2, 3)), np.ones((1, 3))]
    p, m = PadCollate()(feats)
    assert p.shape == (2, 2, 3) and m.sum() == 3
    with pytest.raises(ValueError, match=r"sequence 1 has shape \(1, 4\)"):
        pad_sequence([np.ones((2, 3)), np.ones((1, 4))])


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 30), batch_size=st.integers(1, 8), drop_last=st.booleans())
def test_single_process_loader_equals_torch(n, batch_size, drop_last):
    x = np.arange(n * 3, dtype=np.float32).reshape(n, 3)
    y = np.arange(n)
    ours = list(DataLoader(TensorDataset(x, y), batch_size=batch_size, drop_last=drop_last))
    theirs = list(tdata.DataLoader(tdata.TensorDataset(torch.from_numpy(x),
                                                       torch.from_numpy(y)),
                                   batch_size=batch_size, drop_last=drop_last))
    assert len(ours) == len(theirs)
    for (a, b), (ta, tb) in zip(ours, theirs):
        np.testing.assert_array_equal(a, ta.numpy())
        np.testing.assert_array_equal(b, tb.numpy())


def test_loader_without_batching_and_with_batch_sampler():
    ds = TensorDataset(np.arange(5))
    items = list(DataLoader(ds, batch_size=None))
    assert [int(i[0]) for i in items] == [0, 1, 2, 3, 4]
    batches = list(DataLoader(ds, batch_sampler=[[4, 0], [2]]))
    assert [b[0].tolist() for b in batches] == [[4, 0], [2]]


def test_loader_argument_errors():
    ds = TensorDataset(np.arange(5))
    cases = [
        (dict(batch_size=0), ValueError, "batch_size must be an integer >= 1, got 0"),
        (dict(num_workers=-1), ValueError, "num_workers must be an integer >= 0, got -1"),
        (dict(prefetch_factor=0), ValueError, "prefetch_factor must be an integer >= 1"),
        (dict(timeout=-1), ValueError, "timeout must be a non-negative number"),
        (dict(shuffle=1), TypeError, "shuffle must be a bool, got 1"),
        (dict(persistent_workers=True), ValueError, "persistent_workers=True needs"),
        (dict(sampler=[0, 1], shuffle=True), ValueError, "sampler is mutually exclusive"),
        (dict(batch_sampler=[[0]], batch_size=2), ValueError, "batch_sampler is mutually"),
        (dict(batch_size=None, drop_last=True), ValueError, "drop_last=True needs"),
        (dict(collate_fn=3), TypeError, "collate_fn must be callable, got int"),
        (dict(seed=-2), ValueError, "seed must be an integer >= 0, got -2"),
        (dict(multiprocessing_context="nope"), ValueError, "multiprocessing_context 'nope'"),
    ]
    for kwargs, err, msg in cases:
        with pytest.raises(err, match=msg):
            DataLoader(ds, **kwargs)
    with pytest.raises(TypeError, match="map-style Dataset"):
        DataLoader(object())


def test_collate_stacks_straight_into_the_slot():
    from lezero.data.collate import collate_into
    prefix = new_prefix()
    writer, reader = SlotWriter(prefix, 0), SlotReader(prefix, 1, 1)
    rng = np.random.default_rng(0)

    def build(n, extra=None):
        samples = [(rng.random((4, 5)), np.int64(k)) for k in range(n)]
        assert reader.take(0) == 0                # the slot is free again each time
        arena = writer.arena(0)
        with collate_into(arena.alloc):
            batch = default_collate(samples)
        if extra is not None:
            batch = batch + [extra(batch)]
        return samples, batch, arena

    try:
        samples, batch, arena = build(8)          # no segment yet: ordinary arrays, copied
        assert arena.top == 0
        out = reader.read(0, 0, writer.write(0, batch, arena))
        np.testing.assert_array_equal(out[0], np.stack([s[0] for s in samples]))
        del out                                   # the user drops it: slot 0 is free
        samples, batch, arena = build(8, extra=lambda b: b[0][:, ::2, 1])   # fits: in place
        seg = writer.segments[0]
        assert arena.top > 0 and np.shares_memory(batch[0], np.ndarray(seg.size, np.uint8,
                                                                       buffer=seg.buf))
        desc = writer.write(0, batch, arena)
        out = reader.read(0, 0, desc)
        np.testing.assert_array_equal(out[0], np.stack([s[0] for s in samples]))
        np.testing.assert_array_equal(out[1], np.arange(8))
        np.testing.assert_array_equal(out[2], out[0][:, ::2, 1])     # a view, copied after
        assert desc[1][0][2] == 0 and desc[1][2][2] >= arena.top
        name = desc[0]
        del out
        samples, batch, arena = build(200)          # too big: relaid out in a new segment
        desc = writer.write(0, batch, arena)
        assert desc[0] != name
        np.testing.assert_array_equal(reader.read(0, 0, desc)[0],
                                      np.stack([s[0] for s in samples]))
    finally:
        writer.close()
        reader.close()
    import os
    assert not [n for n in os.listdir("/dev/shm") if n.startswith(prefix)]
