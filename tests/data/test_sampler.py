"""Samplers: properties for any size, and PyTorch's semantics where they are fixed."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lezero as lz
from lezero.data import (BatchSampler, BucketBatchSampler, DistributedSampler, RandomSampler,
                         SequentialSampler, SubsetRandomSampler, WeightedRandomSampler,
                         padding_waste)

torch = pytest.importorskip("torch")
tdata = torch.utils.data

sizes = st.integers(0, 60)


@settings(max_examples=50, deadline=None)
@given(n=sizes, batch_size=st.integers(1, 9), drop_last=st.booleans())
def test_sequential_batches_equal_torch(n, batch_size, drop_last):
    ours = BatchSampler(SequentialSampler(range(n)), batch_size, drop_last)
    theirs = tdata.BatchSampler(tdata.SequentialSampler(range(n)), batch_size, drop_last)
    assert list(ours) == list(theirs)
    assert len(ours) == len(theirs)


@settings(max_examples=50, deadline=None)
@given(n=st.integers(1, 60), num_samples=st.one_of(st.none(), st.integers(1, 150)),
       seed=st.integers(0, 2**32))
def test_random_sampler_without_replacement_is_whole_permutations(n, num_samples, seed):
    s = RandomSampler(range(n), num_samples=num_samples,
                      generator=np.random.default_rng(seed))
    got = list(s)
    total = n if num_samples is None else num_samples
    assert len(got) == len(s) == total
    for start in range(0, total - total % n, n):            # every full pass: a permutation
        assert sorted(got[start:start + n]) == list(range(n))
    assert len(set(got[total - total % n:])) == total % n    # the tail: no repeats


def test_random_sampler_with_replacement_and_epochs():
    s = RandomSampler(range(5), replacement=True, num_samples=2000,
                      generator=np.random.default_rng(0))
    got = np.array(list(s))
    assert got.min() == 0 and got.max() == 4
    counts = np.bincount(got, minlength=5)
    assert np.all(np.abs(counts - 400) < 80)            # uniform (5 sigma is about 90)
    s2 = RandomSampler(range(30), generator=np.random.default_rng(1))
    assert list(s2) != list(s2)                         # a new order every epoch
    lz.manual_seed(5)
    a = list(RandomSampler(range(30)))
    lz.manual_seed(5)
    assert a == list(RandomSampler(range(30)))          # generator=None follows manual_seed


def test_subset_random_sampler():
    s = SubsetRandomSampler([3, 9, 4, 7], generator=np.random.default_rng(0))
    assert sorted(s) == [3, 4, 7, 9] and len(s) == 4


def test_weighted_sampler_frequencies():
    w = [0.0, 1.0, 3.0]
    got = np.array(list(WeightedRandomSampler(w, 4000, generator=np.random.default_rng(0))))
    counts = np.bincount(got, minlength=3)
    assert counts[0] == 0                                # weight zero: never drawn
    assert abs(counts[2] / counts[1] - 3.0) < 0.35
    no_rep = list(WeightedRandomSampler([1, 1, 5, 0], 3, replacement=False,
                                        generator=np.random.default_rng(0)))
    assert sorted(no_rep) == [0, 1, 2]
    with pytest.raises(ValueError, match="without replacement from 3 non-zero"):
        WeightedRandomSampler([1, 1, 5, 0], 4, replacement=False)
    with pytest.raises(ValueError, match="non-negative"):
        WeightedRandomSampler([1, -1], 4)
    with pytest.raises(ValueError, match="num_samples must be a positive integer, got 0"):
        WeightedRandomSampler([1, 1], 0)


@settings(max_examples=60, deadline=None)
@given(n=sizes, replicas=st.integers(1, 5), shuffle=st.booleans(), epoch=st.integers(0, 3))
def test_distributed_each_sample_exactly_once_across_ranks(n, replicas, shuffle, epoch):
    shards = []
    for rank in range(replicas):
        s = DistributedSampler(range(n), num_replicas=replicas, rank=rank, shuffle=shuffle,
                               seed=11)
        s.set_epoch(epoch)
        shards.append(list(s))
        assert len(shards[-1]) == len(s)
    assert sorted(i for sh in shards for i in sh) == list(range(n))
    assert max(map(len, shards)) - min(map(len, shards)) <= 1


@settings(max_examples=40, deadline=None)
@given(n=sizes, replicas=st.integers(1, 5), drop_last=st.booleans())
def test_distributed_pad_and_drop_last_match_torch(n, replicas, drop_last):
    for rank in range(replicas):
        ours = DistributedSampler(range(n), replicas, rank, shuffle=False,
                                  drop_last=drop_last, pad=not drop_last)
        theirs = tdata.DistributedSampler(range(n), replicas, rank, shuffle=False,
                                          drop_last=drop_last)
        if n == 0 and not drop_last:
            continue              # torch cannot pad an empty dataset
        assert list(ours) == list(theirs)
        assert len(ours) == len(theirs)


def test_distributed_epochs_and_errors(monkeypatch):
    s = DistributedSampler(range(20), num_replicas=2, rank=0, seed=0)
    first = list(s)
    s.set_epoch(1)
    assert list(s) != first
    s.set_epoch(0)
    assert list(s) == first
    with pytest.raises(ValueError, match=r"rank must be in \[0, 2\), got 2"):
        DistributedSampler(range(4), num_replicas=2, rank=2)
    # no world (whatever an earlier test in this process initialised)
    monkeypatch.setattr("lezero.parallel.is_initialized", lambda: False)
    with pytest.raises(ValueError, match="num_replicas and rank"):
        DistributedSampler(range(4))


@settings(max_examples=40, deadline=None)
@given(lengths=st.lists(st.integers(0, 50), min_size=0, max_size=120),
       batch_size=st.integers(1, 8), drop_last=st.booleans(), shuffle=st.booleans(),
       bucket=st.integers(1, 5))
def test_bucket_sampler_each_index_once(lengths, batch_size, drop_last, shuffle, bucket):
    s = BucketBatchSampler(lengths, batch_size, drop_last=drop_last, shuffle=shuffle,
                           bucket_size=bucket, generator=np.random.default_rng(0))
    batches = list(s)
    flat = [i for b in batches for i in b]
    n = len(lengths)
    assert len(batches) == len(s)
    assert len(flat) == len(set(flat)) == (n - n % batch_size if drop_last else n)
    assert sum(len(b) < batch_size for b in batches) <= (0 if drop_last else 1)


def test_bucket_sampler_reduces_padding_waste():
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 200, size=2000)
    bucketed = BucketBatchSampler(lengths, 32, generator=np.random.default_rng(1))
    assert bucketed.padding_stats() is None
    list(bucketed)
    stats = bucketed.padding_stats()
    random_batches = list(BatchSampler(RandomSampler(range(2000),
                                                     generator=np.random.default_rng(1)),
                                       32, False))
    baseline = padding_waste(random_batches, lengths)
    assert stats["tokens"] == baseline["tokens"] == int(lengths.sum())
    assert baseline["waste"] > 0.4            # random batches pad about half
    assert stats["waste"] < 0.05              # neighbours in length: almost none
    assert padding_waste([[0, 1]], [3, 1]) == {"tokens": 4, "padded": 6, "waste": 1 / 3}


def test_sampler_argument_errors():
    with pytest.raises(ValueError, match="batch_size must be a positive integer, got 0"):
        BatchSampler(range(3), 0, False)
    with pytest.raises(TypeError, match="drop_last must be a bool"):
        BatchSampler(range(3), 2, None)
    with pytest.raises(TypeError, match="replacement must be a bool"):
        RandomSampler(range(3), replacement=1)
    with pytest.raises(TypeError, match="generator must be a numpy.random.Generator"):
        RandomSampler(range(3), generator=42)
    with pytest.raises(ValueError, match="lengths must be a 1-D sequence of non-negative"):
        BucketBatchSampler([1.5, 2.0], 2)
