"""Run under ``mpiexec -n 2`` (``make test`` does): data sharding and gradient averaging.

Every rank runs the same tests in the same order, so collectives line up.
"""
import numpy as np
import pytest

import lezero as lz
import lezero.functions as F
from lezero.data import DataLoader, DistributedSampler, TensorDataset

MPI = pytest.importorskip("mpi4py.MPI")
COMM = MPI.COMM_WORLD
pytestmark = [pytest.mark.mpi, pytest.mark.timeout(120)]


@pytest.mark.parametrize("n,drop_last", [(101, False), (100, False), (101, True)])
def test_distributed_sampler_covers_each_sample_once_across_ranks(n, drop_last):
    sampler = DistributedSampler(range(n), num_replicas=COMM.size, rank=COMM.rank,
                                 shuffle=True, seed=7, drop_last=drop_last)
    sampler.set_epoch(3)
    mine = list(sampler)
    everyone = COMM.allgather(mine)
    flat = [i for part in everyone for i in part]
    assert len(flat) == len(set(flat)), "a sample was given to two ranks"
    if drop_last:
        assert len(flat) == n - n % COMM.size
        assert len({len(p) for p in everyone}) == 1
    else:
        assert sorted(flat) == list(range(n))


def test_data_parallel_sgd_by_allreduce_matches_single_process_training():
    """Averaging gradients over ranks equals training on the whole batch in one process."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 5)).astype(np.float32)
    t = (x @ rng.standard_normal((5, 1))).astype(np.float32)
    w0 = rng.standard_normal((5, 1)).astype(np.float32)

    def train(shards, rank):
        w = lz.Parameter(w0.copy())
        loader = DataLoader(TensorDataset(x, t), batch_size=16 // shards,
                            sampler=DistributedSampler(range(64), shards, rank, shuffle=False))
        for xb, tb in loader:
            loss = F.mse_loss(lz.Variable(xb, requires_grad=False) @ w, tb)
            w.cleargrad()
            loss.backward()
            g = w.grad.data
            if shards > 1:
                COMM.Allreduce(MPI.IN_PLACE, g, op=MPI.SUM)
                g /= shards
            w.data -= 0.1 * g
        return w.data

    local = train(COMM.size, COMM.rank)
    gathered = COMM.allgather(local)
    for other in gathered:
        np.testing.assert_array_equal(other, gathered[0])   # ranks stay in lock step
    # Rank r takes positions r, r+R, ...: together one step's shards are 16 consecutive
    # samples, so the averaged gradient is the full-batch gradient of one process.
    reference = train(1, 0)
    np.testing.assert_allclose(local, reference, rtol=1e-5, atol=1e-6)
