"""Property: what an epoch delivers does not depend on how many workers load it, nor on
the batch size (beyond what ``drop_last`` leaves out).

``test_workers.py`` already checks, per configuration, that each index comes once and
that one seed gives the same batches whatever the worker count.  This file states the law
across configurations: for one seed, every (worker count, batch size) pair sees the same
samples, in the same sampler order; ``drop_last`` keeps exactly the first
``n - n % batch_size`` of that order.  Workers are processes, so the examples are few
and the datasets small.
"""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lezero.data import DataLoader, TensorDataset

pytestmark = pytest.mark.timeout(120)


def squares(n):
    """Sample ``i`` is ``(i, i * i)``: the value, not only the index, travels."""
    i = np.arange(n, dtype=np.int64)
    return TensorDataset(np.stack([i, i * i], axis=1))


def epoch(n, batch_size, workers, shuffle, drop_last, seed):
    """The samples of one epoch, flattened in delivery order, as (i, i*i) tuples."""
    loader = DataLoader(squares(n), batch_size=batch_size, shuffle=shuffle,
                        num_workers=workers, drop_last=drop_last, seed=seed)
    return [tuple(int(v) for v in row) for (batch,) in loader for row in np.asarray(batch)]


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(1, 17), sizes=st.lists(st.integers(1, 6), min_size=2, max_size=2,
                                            unique=True),
       shuffle=st.booleans(), drop_last=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_epoch_samples_equal_across_worker_counts_and_batch_sizes(n, sizes, shuffle,
                                                                  drop_last, seed):
    order = epoch(n, 1, 0, shuffle, False, seed)       # the sampler's order, unbatched
    assert sorted(order) == [(i, i * i) for i in range(n)]
    for batch_size in sizes:
        kept = n - n % batch_size if drop_last else n
        for workers in (0, 1, 2):
            seen = epoch(n, batch_size, workers, shuffle, drop_last, seed)
            assert seen == order[:kept], (batch_size, workers)


def test_the_law_fails_for_a_different_seed():
    """The order compared above is the seed's: another seed shuffles differently."""
    a = epoch(16, 4, 0, True, False, 1)
    b = epoch(16, 4, 0, True, False, 2)
    assert sorted(a) == sorted(b) and a != b
