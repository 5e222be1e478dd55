"""The process grid under mpiexec: its sub-communicators hold the ranks its arithmetic says,
and GPT-mini trained on Grid(2,2,1), (1,2,2), (2,1,2) (under -n 4; the two-rank grids under
-n 2) follows the loss curve of one process with the whole batch and ends with the same
parameters (float32 tolerance)."""
import numpy as np
import pytest

import lezero as lz
from lezero import optim, parallel
from lezero.nn.models.gpt import GPT, GPTConfig
from tests.parallel.tp_reference import agree, agree_all_close, agree_close, world

pytestmark = [pytest.mark.mpi, pytest.mark.timeout(60)]
CFG = GPTConfig(vocab_size=13, block_size=8, n_layer=2, n_head=4, d_model=16)
STEPS, BATCH = 3, 8


def shapes(size):
    return {1: [(1, 1, 1)], 2: [(2, 1, 1), (1, 2, 1), (1, 1, 2)],
            4: [(2, 2, 1), (1, 2, 2), (2, 1, 2), (1, 4, 1), (1, 1, 4)]}.get(size, [])


@pytest.fixture
def grid_of(request):
    made = []

    def build(dp, tp, pp):
        w = world()
        if dp * tp * pp != w.size:
            pytest.skip(f"Grid({dp}, {tp}, {pp}) needs {dp * tp * pp} ranks, the world has "
                        f"{w.size}")
        made.append(parallel.Grid(dp, tp, pp))
        return made[-1]
    yield build
    parallel.set_grid(None)


@pytest.mark.parametrize("dims", shapes(4) + [s for s in shapes(2) if s not in shapes(4)]
                         + shapes(1))
def test_sub_communicators_match_the_layout(grid_of, dims):
    grid = grid_of(*dims)
    for dim, comm in (("tp", grid.tp_comm), ("dp", grid.dp_comm), ("pp", grid.pp_comm)):
        members = comm.allgather_object(grid.rank)
        mine = [g for g in grid.groups(dim) if grid.rank in g]
        agree(members == mine[0], f"{dim} group {members} != layout {mine}")
        agree(comm.rank == getattr(grid.coord, dim), f"{dim} rank is the coordinate")
    agree(grid.rank_of(*grid.coord) == grid.rank, "rank_of inverts coords")
    agree(f"this rank: {grid.rank}" in grid.layout(), "layout names this rank")
    agree(parallel.current_grid() is grid, "a new grid is current")


def reference_run(idx, tgt):
    lz.manual_seed(0)
    ref = GPT(CFG)
    opt = optim.AdamW(ref.parameters(), lr=1e-2)
    losses = []
    for s in range(STEPS):
        opt.zero_grad()
        loss = ref.loss(idx[s], tgt[s])
        loss.backward()
        opt.step()
        losses.append(float(loss.data))
    return ref, losses


def data():
    rng = np.random.default_rng(3)
    return (rng.integers(0, 13, (STEPS, BATCH, 8)), rng.integers(0, 13, (STEPS, BATCH, 8)))


@pytest.mark.parametrize("dims", [(2, 2, 1), (1, 2, 2), (2, 1, 2), (2, 1, 1), (1, 2, 1),
                                  (1, 1, 2)])
def test_gpt_mini_on_the_grid_equals_one_process(grid_of, dims):
    grid = grid_of(*dims)
    idx, tgt = data()
    ref, ref_losses = reference_run(idx, tgt)
    lz.manual_seed(0)
    gpt = parallel.GridGPT(CFG, grid, micro_batches=2)
    opt = optim.AdamW(gpt.parameters(), lr=1e-2)
    losses = []
    for s in range(STEPS):
        opt.zero_grad()
        losses.append(gpt.step(idx[s], tgt[s]))
        opt.step()
    agree_close(losses, ref_losses, rtol=1e-5, atol=1e-6, what="loss curve")
    expected = parallel.shard_state_dict(gpt.pipe, ref.state_dict())
    agree_all_close([(k, v, expected[k]) for k, v in gpt.pipe.model_state_dict().items()],
                    rtol=1e-4, atol=2e-5, what=f"parameters after {STEPS} steps")


def test_tensor_parallel_model_under_data_parallel(grid_of):
    grid = grid_of(2, world().size // 2, 1) if world().size in (2, 4) else grid_of(9, 9, 9)
    idx, tgt = data()
    ref, ref_losses = reference_run(idx, tgt)
    lz.manual_seed(0)
    model = parallel.ParallelGPT(CFG)                  # comm=None: the grid's tensor group
    dp = parallel.DataParallel(model, comm=grid.dp_comm)
    opt = optim.AdamW(dp.parameters(), lr=1e-2)
    half = BATCH // 2
    d = grid.coord.dp
    for s in range(STEPS):
        opt.zero_grad()
        model.loss(idx[s][d * half:(d + 1) * half], tgt[s][d * half:(d + 1) * half]).backward()
        opt.step()
    expected = parallel.shard_state_dict(model, ref.state_dict())
    agree_all_close([(k, v, expected[k]) for k, v in model.state_dict().items()],
                    rtol=1e-4, atol=2e-5, what="DataParallel(ParallelGPT) parameters")
