"""Grid(dp, tp, pp) in the normal suite: the rank <-> coordinate map, the groups, the
``split`` calls each rank makes (recorded by a fake communicator standing in for every
rank of an 8-rank world), the printed layout, the current-grid rules, and the errors."""
import pytest

from lezero import parallel
from lezero.parallel import Communicator, Grid

pytestmark = pytest.mark.timeout(60)


class FakeComm(Communicator):
    """Rank ``rank`` of ``size``; records the splits asked of it."""

    backend = "fake"

    def __init__(self, rank, size, name="world"):
        super().__init__(rank, size, name, timeout=5.0)
        self.splits = []
        self.check_collectives = False       # no side channel to agree over

    def allgather_object(self, obj):
        return [obj] * self.size             # every rank builds the same grid

    def _split(self, color, key, name):
        self.splits.append((color, key, name))
        return FakeComm(key, 1, name)


@pytest.fixture(autouse=True)
def no_grid():
    yield
    parallel.set_grid(None)


def test_coordinates_tensor_fastest_then_data_then_pipeline():
    g = Grid(2, 2, 2, comm=FakeComm(5, 8))
    assert g.coord == (0, 1, 1) and g.coord.tp == 1
    assert [tuple(g.coords(r)) for r in range(8)] == [
        (0, 0, 0), (0, 1, 0), (1, 0, 0), (1, 1, 0), (0, 0, 1), (0, 1, 1), (1, 0, 1), (1, 1, 1)]
    assert all(g.rank_of(*g.coords(r)) == r for r in range(8))
    assert g.groups("tp") == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert g.groups("dp") == [[0, 2], [1, 3], [4, 6], [5, 7]]
    assert g.groups("pp") == [[0, 4], [1, 5], [2, 6], [3, 7]]


@pytest.mark.parametrize("dims", [(2, 2, 2), (1, 4, 2), (4, 1, 2), (2, 4, 1), (8, 1, 1)])
def test_every_rank_splits_into_the_groups_of_the_layout(dims):
    size = dims[0] * dims[1] * dims[2]
    calls = {}
    for r in range(size):
        comm = FakeComm(r, size)
        Grid(*dims, comm=comm)
        calls[r] = comm.splits
    for i, dim in enumerate(("tp", "dp", "pp")):
        reference = Grid(*dims, comm=FakeComm(0, size))
        for group in reference.groups(dim):
            colors = {calls[r][i][0] for r in group}
            assert len(colors) == 1, f"{dim} group {group} got colors {colors}"
            keys = [calls[r][i][1] for r in group]
            assert keys == list(range(len(group))), f"{dim} keys {keys}"
        all_colors = {calls[g[0]][i][0] for g in reference.groups(dim)}
        assert len(all_colors) == len(reference.groups(dim))     # distinct groups
    assert calls[0][0][2] == "world/tp[dp=0,pp=0]"


def test_layout_text():
    text = Grid(2, 2, 2, comm=FakeComm(6, 8)).layout()
    lines = text.splitlines()
    assert lines[0] == "Grid(dp=2, tp=2, pp=2): 8 ranks, rank = tp + 2 * (dp + 2 * pp)"
    assert lines[1].split() == ["tp=0", "tp=1"]
    assert lines[2].split() == ["pp=0", "dp=0", "0", "1"]
    assert lines[5].split() == ["dp=1", "6", "7"]
    assert "pipeline groups: [0, 4] [1, 5] [2, 6] [3, 7]" in text
    assert lines[-1] == "this rank: 6 = (dp=1, tp=0, pp=1)"


def test_current_grid_and_comm_none():
    g = Grid(1, 1, 1, comm=FakeComm(0, 1))
    assert parallel.current_grid() is g                       # building makes it current
    from lezero.parallel.tensor.sharding import tp_comm
    assert tp_comm(None) is g.tp_comm
    h = Grid(1, 1, 1, comm=FakeComm(0, 1))
    with g:
        assert parallel.current_grid() is g
    assert parallel.current_grid() is h
    parallel.set_grid(None)
    assert parallel.current_grid() is None
    with pytest.raises(TypeError, match="expected a Grid or None"):
        parallel.set_grid("grid")


def test_grid_errors():
    with pytest.raises(ValueError, match=r"2 x 2 x 1 = 4 ranks, but the communicator has 8"):
        Grid(2, 2, 1, comm=FakeComm(0, 8))
    with pytest.raises(ValueError, match="tp must be a positive int"):
        Grid(8, 0, 1, comm=FakeComm(0, 8))
    with pytest.raises(TypeError, match="dp must be an int"):
        Grid(2.0, 2, 2, comm=FakeComm(0, 8))
    with pytest.raises(TypeError, match="comm must be a lezero.parallel Communicator"):
        Grid(1, 1, 1, comm="world")
    g = Grid(2, 2, 2, comm=FakeComm(0, 8))
    with pytest.raises(ValueError, match="rank must be <= 7"):
        g.coords(8)
    with pytest.raises(ValueError, match="dim must be one of"):
        g.groups("ep")


def test_grid_layout_needs_no_communicator():
    plan = parallel.GridLayout(2, 8, 4)
    assert plan.size == 64 and plan.coords(63) == (1, 7, 3)
    assert plan.groups("tp")[0] == list(range(8))
    assert "this rank" not in plan.layout() and repr(plan).startswith("<GridLayout dp=2")
