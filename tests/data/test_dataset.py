"""Dataset classes and random_split, against torch.utils.data where it applies."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lezero as lz
from lezero.data import (ChainDataset, ConcatDataset, Dataset, IterableDataset, Subset,
                         TensorDataset, random_split)

torch = pytest.importorskip("torch")


class Squares(Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if not -self.n <= i < self.n:
            raise IndexError(i)
        return (i % self.n) ** 2


def test_tensor_dataset_rows_and_errors():
    x = np.arange(12.0).reshape(6, 2)
    y = np.arange(6)
    ds = TensorDataset(x, lz.Variable(y))
    assert len(ds) == 6
    xi, yi = ds[4]
    np.testing.assert_array_equal(xi, [8.0, 9.0])
    assert yi == 4
    with pytest.raises(ValueError, match=r"different lengths, \[6, 5\]"):
        TensorDataset(x, np.arange(5))
    with pytest.raises(ValueError, match="scalar"):
        TensorDataset(np.float32(1))
    with pytest.raises(ValueError, match="at least one"):
        TensorDataset()


def test_subset_and_concat_match_torch():
    a, b = Squares(5), Squares(3)
    cat = a + b
    tcat = torch.utils.data.ConcatDataset([a, b])
    assert isinstance(cat, ConcatDataset) and len(cat) == len(tcat) == 8
    assert [cat[i] for i in range(-8, 8)] == [tcat[i] for i in range(-8, 8)]
    with pytest.raises(IndexError, match="out of range"):
        cat[8]
    with pytest.raises(IndexError):
        cat[-9]
    sub = Subset(cat, [7, 0, 5])
    assert [sub[i] for i in range(3)] == [4, 0, 0]
    assert sub.__getitems__([2, 0]) == [0, 4]
    with pytest.raises(ValueError, match="empty"):
        ConcatDataset([])


def test_chain_dataset():
    class Count(IterableDataset):
        def __init__(self, n):
            self.n = n

        def __iter__(self):
            return iter(range(self.n))

        def __len__(self):
            return self.n

    chain = Count(2) + Count(3)
    assert isinstance(chain, ChainDataset)
    assert list(chain) == [0, 1, 0, 1, 2] and len(chain) == 5
    with pytest.raises(TypeError, match="IterableDataset"):
        ConcatDataset([Count(2)])


@settings(max_examples=40, deadline=None)
@given(n=st.integers(0, 50), parts=st.lists(st.integers(0, 10), min_size=1, max_size=4))
def test_random_split_counts_partition(n, parts):
    total = sum(parts)
    ds = Squares(total)
    subsets = random_split(ds, parts, generator=np.random.default_rng(n))
    assert [len(s) for s in subsets] == parts
    seen = sorted(i for s in subsets for i in s.indices)
    assert seen == list(range(total))


@pytest.mark.parametrize("n,fractions", [(10, [0.5, 0.5]), (11, [0.3, 0.3, 0.4]),
                                         (7, [0.1, 0.9]), (100, [0.8, 0.1, 0.1])])
def test_random_split_fractions_like_torch(n, fractions):
    ours = random_split(Squares(n), fractions, generator=np.random.default_rng(0))
    theirs = torch.utils.data.random_split(Squares(n), fractions)
    assert [len(s) for s in ours] == [len(s) for s in theirs]
    assert sorted(i for s in ours for i in s.indices) == list(range(n))


def test_random_split_reproducible_and_errors():
    lz.manual_seed(3)
    a = random_split(Squares(20), [10, 10])
    lz.manual_seed(3)
    b = random_split(Squares(20), [10, 10])
    assert a[0].indices == b[0].indices
    with pytest.raises(ValueError, match="sum to 9, but the dataset has 10"):
        random_split(Squares(10), [4, 5])
    with pytest.raises(ValueError, match="fractions summing to 1"):
        random_split(Squares(10), [0.5, 0.6])
    with pytest.raises(TypeError, match="generator"):
        random_split(Squares(10), [5, 5], generator=0)
