"""``Grid(dp, tp, pp)``: the world's ranks arranged as data x tensor x pipeline parallelism.

Ranks are numbered with the tensor index fastest, then data, then pipeline (Megatron's
order)::

    rank = tp_index + tp * (dp_index + dp * pp_index)

so a tensor group -- the ranks that all-reduce inside every layer -- is a run of
consecutive ranks, which a launcher places on one node (NVLink); pipeline neighbours,
which exchange only activations, are furthest apart.  The grid makes one
sub-communicator per dimension with ``comm.split``:

* ``tp_comm``: same (dp, pp), tp varying -- the tensor-parallel layers' group;
* ``dp_comm``: same (tp, pp) -- the ranks whose gradients are averaged;
* ``pp_comm``: same (dp, tp) -- the stages of one pipeline.

Building a Grid makes it the *current* grid (as Megatron's ``initialize_model_parallel``
does), so tensor-parallel layers and pipelines created with ``comm=None`` use its groups;
``with grid:`` makes a grid current for a block and restores the previous one after.
``layout()`` prints who is where; ``GridLayout(dp, tp, pp)`` is the same arithmetic without
communicators (to plan or draw a grid from one process).
"""
from typing import NamedTuple

from lezero.utils.checks import check_int

_current = None


class Coord(NamedTuple):
    dp: int
    tp: int
    pp: int


def current_grid():
    """The grid ``comm=None`` resolves through (None: the world)."""
    return _current


def set_grid(grid):
    """Make ``grid`` (a Grid or None) current; returns the previous one."""
    global _current
    if grid is not None and not isinstance(grid, Grid):
        raise TypeError(f"set_grid: expected a Grid or None, got {type(grid).__name__}")
    previous, _current = _current, grid
    return previous


class GridLayout:
    """The arithmetic of a ``dp x tp x pp`` grid, without any communicator: coordinates,
    groups and the printed layout (for planning a run, or drawing one)."""

    def __init__(self, dp, tp, pp):
        where = type(self).__name__
        self.dp, self.tp, self.pp = (check_int(where, n, v, 1)
                                     for n, v in (("dp", dp), ("tp", tp), ("pp", pp)))
        self.rank = None

    @property
    def size(self):
        return self.dp * self.tp * self.pp

    def coords(self, rank):
        """The ``Coord(dp, tp, pp)`` of ``rank``."""
        rank = check_int("Grid.coords", "rank", rank, 0, self.size - 1)
        t = rank % self.tp
        d = (rank // self.tp) % self.dp
        return Coord(d, t, rank // (self.tp * self.dp))

    def rank_of(self, dp=0, tp=0, pp=0):
        """The rank at coordinates (dp, tp, pp)."""
        for name, v, n in (("dp", dp, self.dp), ("tp", tp, self.tp), ("pp", pp, self.pp)):
            check_int("Grid.rank_of", name, v, 0, n - 1)
        return tp + self.tp * (dp + self.dp * pp)

    def groups(self, dim):
        """Every group of dimension ``dim`` ("dp", "tp", "pp") as lists of ranks."""
        from lezero.utils.checks import check_choice
        dim = check_choice("Grid.groups", "dim", dim, ("dp", "tp", "pp"))
        others = [n for n in ("dp", "tp", "pp") if n != dim]
        out = []
        for b in range(getattr(self, others[1])):
            for a in range(getattr(self, others[0])):
                fixed = {others[0]: a, others[1]: b}
                out.append([self.rank_of(**fixed, **{dim: i})
                            for i in range(getattr(self, dim))])
        return sorted(out)

    def layout(self):
        """A text picture of the grid: the rank at each (pp, dp, tp), and the groups."""
        lines = [f"Grid(dp={self.dp}, tp={self.tp}, pp={self.pp}): {self.size} ranks, "
                 f"rank = tp + {self.tp} * (dp + {self.dp} * pp)",
                 " " * 12 + "".join(f"{f'tp={t}':>6}" for t in range(self.tp))]
        for p in range(self.pp):
            for d in range(self.dp):
                head = (f"pp={p}" if d == 0 else "").ljust(6) + f"dp={d}".ljust(6)
                lines.append(head + "".join(f"{self.rank_of(d, t, p):>6}"
                                            for t in range(self.tp)))
        for dim, title in (("tp", "tensor"), ("dp", "data"), ("pp", "pipeline")):
            groups = " ".join(str(g) for g in self.groups(dim))
            lines.append(f"{title + ' groups:':<17}{groups}")
        if self.rank is not None:
            c = self.coords(self.rank)
            lines.append(f"this rank: {self.rank} = (dp={c.dp}, tp={c.tp}, pp={c.pp})")
        return "\n".join(lines)

    def __repr__(self):
        return f"<GridLayout dp={self.dp} tp={self.tp} pp={self.pp}: {self.size} ranks>"


class Grid(GridLayout):
    """``dp x tp x pp`` ranks of ``comm`` (default: the world); see the module docstring.

    ``coord`` is this rank's ``Coord(dp, tp, pp)``; ``tp_comm``, ``dp_comm``, ``pp_comm``
    its groups (collective to build: every rank of ``comm`` constructs the same Grid).
    """

    def __init__(self, dp, tp, pp, comm=None):
        super().__init__(dp, tp, pp)
        from lezero.parallel.world import resolve
        self.comm = resolve(comm, "Grid")
        self._check_agreement()
        if self.size != self.comm.size:
            raise ValueError(f"Grid: dp x tp x pp = {self.dp} x {self.tp} x {self.pp} = "
                             f"{self.size} ranks, but the communicator has {self.comm.size}")
        self.rank = self.comm.rank
        self.coord = self.coords(self.rank)
        d, t, p = self.coord
        base = self.comm.name
        self.tp_comm = self.comm.split(d + self.dp * p, key=t, name=f"{base}/tp[dp={d},pp={p}]")
        self.dp_comm = self.comm.split(t + self.tp * p, key=d, name=f"{base}/dp[tp={t},pp={p}]")
        self.pp_comm = self.comm.split(t + self.tp * d, key=p, name=f"{base}/pp[dp={d},tp={t}]")
        set_grid(self)

    def _check_agreement(self):
        """Every rank must build the same grid: a ValueError on every rank otherwise
        (before any split, whose groups would be wrong or never complete)."""
        if self.comm.size == 1:
            return
        mine = (self.dp, self.tp, self.pp)
        everyone = self.comm.allgather_object(mine)
        if any(d != everyone[0] for d in everyone):
            shapes = "; ".join(f"rank {r}: Grid(dp={d[0]}, tp={d[1]}, pp={d[2]})"
                               for r, d in enumerate(everyone))
            raise ValueError(f"Grid: the ranks of communicator '{self.comm.name}' build "
                             f"different grids ({shapes}); every rank must pass the same "
                             "dp, tp and pp")

    def __enter__(self):
        self._entered = set_grid(self)
        return self

    def __exit__(self, *exc):
        set_grid(self._entered)
        return False

    def __repr__(self):
        c = self.coord
        return (f"<Grid dp={self.dp} tp={self.tp} pp={self.pp}: rank {self.rank} at "
                f"(dp={c.dp}, tp={c.tp}, pp={c.pp})>")

