"""Ranks that disagree -- on a collective's shape, dtype, op, root or kind; on a receive
buffer; on a Grid or DataParallel's settings -- get a ValueError naming both sides on
every rank, before any data moves, and the communicator stays usable (run under mpiexec;
alone they skip: one rank always agrees with itself).

Rank 0 passes one thing, every other rank another, so the tests hold at -n 2 and -n 4.
"""
import re

import numpy as np
import pytest

from lezero import nn, parallel

pytestmark = [pytest.mark.mpi, pytest.mark.timeout(60)]


@pytest.fixture(scope="module")
def comm():
    world = parallel.init(timeout=30)
    if world.size == 1:
        pytest.skip("needs several ranks (mpiexec -n 2)")
    return world


def others(comm, regex=True):
    text = "rank 1" if comm.size == 2 else f"ranks {list(range(1, comm.size))}"
    return re.escape(text) if regex else text


def still_usable(comm):
    np.testing.assert_array_equal(comm.allreduce(np.ones(3)), np.full(3, comm.size))


@pytest.mark.parametrize("mine,theirs", [((4, np.float32), (8, np.float32)),
                                         ((4, np.float32), (4, np.float64)),
                                         ((4, np.float32), (100000, np.float32))])
def test_allreduce_of_different_arrays_raises_on_every_rank(comm, mine, theirs):
    n, dtype = mine if comm.rank == 0 else theirs
    with pytest.raises(ValueError) as info:
        comm.allreduce(np.ones(n, dtype))
    text = str(info.value)
    assert f"rank 0: allreduce (sum) of {np.dtype(mine[1])}[{mine[0]}]" in text
    assert f"{others(comm, False)}: allreduce (sum) of {np.dtype(theirs[1])}[{theirs[0]}]" in text
    assert "Communicator.allreduce: the ranks of communicator 'world' disagree" in text
    still_usable(comm)


@pytest.mark.parametrize("op", ["iallreduce", "bcast", "reduce", "reduce_scatter",
                                "allgather", "alltoall"])
def test_every_collective_checks_shapes(comm, op):
    x = np.ones((comm.size * (2 if comm.rank == 0 else 3), 2))
    call = {"iallreduce": lambda: comm.iallreduce(x).wait(),
            "bcast": lambda: comm.bcast(x, 0), "reduce": lambda: comm.reduce(x),
            "reduce_scatter": lambda: comm.reduce_scatter(x),
            "allgather": lambda: comm.allgather(x), "alltoall": lambda: comm.alltoall(x)}[op]
    with pytest.raises(ValueError, match=rf"rank 0: .*float64\[{2 * comm.size}x2\]; "
                                         rf"{others(comm)}: .*float64\[{3 * comm.size}x2\]"):
        call()
    still_usable(comm)


def test_different_collectives_at_the_same_position_raise_on_every_rank(comm):
    x = np.ones(4, np.float32)
    with pytest.raises(ValueError, match=rf"rank 0: allreduce \(sum\) of float32\[4\]; "
                                         rf"{others(comm)}: bcast \(from rank 0\) of"):
        comm.allreduce(x) if comm.rank == 0 else comm.bcast(x, 0)
    with pytest.raises(ValueError, match=r"rank 0: bcast \(from rank 0\)"):
        comm.bcast(x, 0 if comm.rank == 0 else 1)
    with pytest.raises(ValueError, match=r"rank 0: allreduce \(max\)"):
        comm.allreduce(x, "max" if comm.rank == 0 else "sum")
    with pytest.raises(ValueError, match=r"rank 0: barrier; .*: split"):
        comm.barrier() if comm.rank == 0 else comm.split(0)
    still_usable(comm)


def test_a_receive_into_a_buffer_of_another_shape_or_dtype_raises(comm):
    if comm.rank == 0:
        for r in range(1, comm.size):
            comm.send(np.ones(8, np.float32), r, tag=4)
            comm.send(np.ones(4, np.float32), r, tag=4)
    else:
        with pytest.raises(ValueError, match=r"rank 0 sent float32\[8\] \(tag 4\) but rank "
                                             rf"{comm.rank} receives into float32\[4\]"):
            comm.recv(np.zeros(4, np.float32), 0, tag=4)
        with pytest.raises(ValueError, match=r"sent float32\[4\] .* into float64\[2\]"):
            comm.recv(np.zeros(2, np.float64), 0, tag=4)
    still_usable(comm)


def test_checked_messages_keep_their_order(comm):
    right, left = (comm.rank + 1) % comm.size, (comm.rank - 1) % comm.size
    outs = [np.empty(3) for _ in range(3)]
    recvs = [comm.irecv(o, left, tag=6) for o in outs]
    sends = [comm.isend(np.full(3, 10 * comm.rank + k, np.float64), right, tag=6)
             for k in range(3)]
    for r in reversed(recvs):                 # waited out of order on purpose
        r.wait()
    for s in sends:
        s.wait()
    np.testing.assert_array_equal(np.stack(outs)[:, 0], [10 * left + k for k in range(3)])


def test_checks_can_be_turned_off(comm):
    assert comm.check_collectives
    comm.check_collectives = False
    try:
        assert comm.split(0).check_collectives is False
        still_usable(comm)
    finally:
        comm.check_collectives = True
    with pytest.raises(TypeError, match="check_collectives must be a bool"):
        comm.check_collectives = 1


def test_a_grid_the_ranks_disagree_on_raises_on_every_rank(comm):
    with pytest.raises(ValueError, match=rf"but the communicator has {comm.size}"):
        parallel.Grid(comm.size + 1, 1, 1)
    dims = (comm.size, 1, 1) if comm.rank == 0 else (1, comm.size, 1)
    with pytest.raises(ValueError, match=rf"rank 0: Grid\(dp={comm.size}, tp=1, pp=1\); "
                                         rf"rank 1: Grid\(dp=1, tp={comm.size}, pp=1\)"):
        parallel.Grid(*dims)
    parallel.set_grid(None)
    still_usable(comm)


def test_data_parallel_settings_must_agree(comm):
    with pytest.raises(ValueError, match=r"bucket_mb=25.0 on rank 0 but 1.0 on rank 1"):
        parallel.DataParallel(nn.Linear(3, 2), comm, bucket_mb=25 if comm.rank == 0 else 1)
    with pytest.raises(ValueError, match=r"find_unused_parameters=False on rank 0 but True"):
        parallel.DataParallel(nn.Linear(3, 2), comm, find_unused_parameters=comm.rank > 0)
    still_usable(comm)
