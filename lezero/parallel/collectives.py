"""Differentiable collectives: Functions whose backward is the matching collective.

Two conventions for what a gradient across ranks means, and operators for each:

**Summed objective** (data parallelism, SyncBatchNorm): every rank computes its own loss
and the objective is their sum.  The adjoint of a collective is then its transpose:

    all_reduce     forward: sum over ranks          backward: all_reduce (sum)
    all_gather     forward: concatenate the shards  backward: reduce_scatter (sum)
    reduce_scatter forward: sum, keep my chunk      backward: all_gather
    broadcast      forward: root's value everywhere backward: sum onto root (zeros elsewhere)

**Replicated objective** (Megatron-style tensor parallelism): the loss is computed
identically on every rank of the group.  The conjugate pairs are

    copy_to_parallel_region      forward: identity    backward: all_reduce
    reduce_from_parallel_region  forward: all_reduce  backward: identity
    scatter_to_parallel_region   forward: my chunk    backward: all_gather
    gather_from_parallel_region  forward: all_gather  backward: my chunk

Each backward calls the partner Function, so double backward works.  Like every
collective, these must be called by all ranks of ``comm`` in the same order, and their
outputs must receive a gradient on all ranks or on none (else a backward collective runs
on some ranks only and waits for the others).  Each is a visible Function class, so it
shows by name in ``lz.utils.get_dot_graph``.
"""
import time

from lezero.core import Function, Variable, as_variable
from lezero.parallel import accounting
from lezero.utils.checks import check_choice, check_int


def _comm(comm):
    from lezero.parallel.world import resolve
    return resolve(comm)


class _Collective(Function):
    """A collective on ``comm``.  ``scope`` and ``phase`` label it for communication
    accounting (``accounting.py``): the scope current at creation and "forward", unless a
    backward passes its own (a partner made in backward is "backward", same scope)."""

    def __init__(self, comm, scope=None, phase="forward", **options):
        self.comm = comm
        self.scope = accounting.current_scope() if scope is None else scope
        self.phase = phase
        self.__dict__.update(options)

    def _timed(self, op, x, run):
        """``run()`` (the collective), counted and timed while accounting is active."""
        if not accounting._active:
            return run()
        start = time.perf_counter()
        y = run()
        accounting.record(self.scope, self.phase, op, self.comm, x.nbytes,
                          time.perf_counter() - start)
        return y

    def _partner(self, cls, **options):
        """The Function of ``cls`` a backward runs, labelled with this one's scope."""
        return cls(self.comm, scope=self.scope, phase="backward", **options)


def _chunk(comm, x, axis, where):
    """This rank's chunk of ``x`` along ``axis`` (the length must divide by the size)."""
    n = x.shape[axis]
    if n % comm.size:
        raise ValueError(f"{where}: axis {axis} has length {n}, which does not divide into "
                         f"{comm.size} equal chunks (one per rank)")
    c = n // comm.size
    index = [slice(None)] * x.ndim
    index[axis] = slice(comm.rank * c, (comm.rank + 1) * c)
    return x[tuple(index)]


class AllReduce(_Collective):
    """Sum (or mean) over ranks; its backward is the same all-reduce of the gradients."""

    def forward(self, x):
        return self._timed("allreduce", x, lambda: self.comm.allreduce(x, self.op))

    def backward(self, gy):
        return self._partner(AllReduce, op=self.op)(gy)


class AllGather(_Collective):
    """Concatenate every rank's ``x`` along ``axis`` (stack them when axis is None)."""

    def forward(self, x):
        return self._timed("allgather", x, lambda: self.comm.allgather(x, self.axis))

    def backward(self, gy):
        if self.axis is None:
            return self._partner(ReduceScatter, axis=0)(gy).reshape(gy.shape[1:])
        return self._partner(ReduceScatter, axis=self.axis)(gy)


class ReduceScatter(_Collective):
    """Sum over ranks and keep this rank's chunk along ``axis``."""

    def forward(self, x):
        return self._timed("reduce_scatter", x,
                           lambda: self.comm.reduce_scatter(x, "sum", self.axis))

    def backward(self, gy):
        return self._partner(AllGather, axis=self.axis)(gy)


class Broadcast(_Collective):
    """Root's ``x`` on every rank; the gradient is summed onto root (zeros elsewhere)."""

    def forward(self, x):
        return self._timed("bcast", x,                   # bcast writes in place
                           lambda: self.comm.bcast(x.copy(), self.root))

    def backward(self, gy):
        g = self._partner(AllReduce, op="sum")(gy)
        return g if self.comm.rank == self.root else g * 0


class CopyToParallelRegion(_Collective):
    """Identity forward, all-reduce backward (Megatron's ``f``)."""

    def forward(self, x):
        return x

    def backward(self, gy):
        return self._partner(ReduceFromParallelRegion)(gy)


class ReduceFromParallelRegion(_Collective):
    """All-reduce forward, identity backward (Megatron's ``g``)."""

    def forward(self, x):
        return self._timed("allreduce", x, lambda: self.comm.allreduce(x, "sum"))

    def backward(self, gy):
        return self._partner(CopyToParallelRegion)(gy)


class ScatterToParallelRegion(_Collective):
    """Keep this rank's chunk along ``axis``; all-gather backward."""

    def forward(self, x):
        return _chunk(self.comm, x, self.axis, "scatter_to_parallel_region").copy()

    def backward(self, gy):
        return self._partner(GatherFromParallelRegion, axis=self.axis)(gy)


class GatherFromParallelRegion(_Collective):
    """All-gather along ``axis`` forward; keep this rank's chunk backward."""

    def forward(self, x):
        return self._timed("allgather", x, lambda: self.comm.allgather(x, self.axis))

    def backward(self, gy):
        return self._partner(ScatterToParallelRegion, axis=self.axis)(gy)


# ----- the functions users call ----------------------------------------------------------

def _input(where, x):
    if not isinstance(x, Variable):
        from lezero.utils.checks import check_array
        x = as_variable(check_array(where, "x", x))
    return x


def _axis(where, x, axis, allow_none=False):
    if axis is None and allow_none:
        return None
    ndim = x.ndim
    axis = check_int(where, "axis", axis, -max(ndim, 1), max(ndim - 1, 0))
    if ndim == 0:
        raise ValueError(f"{where}: needs an input with at least one axis, got a 0-d one")
    return axis % ndim


def all_reduce(x, op="sum", comm=None):
    """Differentiable all-reduce: ``op`` is "sum" or "mean" over the ranks of ``comm``
    (default: the world); the gradient is all-reduced the same way."""
    x = _input("parallel.all_reduce", x)
    op = check_choice("parallel.all_reduce", "op", op, ("sum", "mean"))
    return AllReduce(_comm(comm), op=op)(x)


def all_gather(x, axis=0, comm=None):
    """Differentiable all-gather: every rank's ``x`` concatenated along ``axis`` in rank
    order (``axis=None`` stacks them on a new first axis); backward is reduce-scatter."""
    x = _input("parallel.all_gather", x)
    return AllGather(_comm(comm), axis=_axis("parallel.all_gather", x, axis, True))(x)


def reduce_scatter(x, axis=0, comm=None):
    """Differentiable reduce-scatter: the sum over ranks, this rank's chunk along
    ``axis`` (the length must divide by the size); backward is all-gather."""
    x = _input("parallel.reduce_scatter", x)
    return ReduceScatter(_comm(comm), axis=_axis("parallel.reduce_scatter", x, axis))(x)


def broadcast(x, root=0, comm=None):
    """Differentiable broadcast of root's ``x``; the gradient is summed onto root."""
    x = _input("parallel.broadcast", x)
    comm = _comm(comm)
    root = check_int("parallel.broadcast", "root", root, 0, comm.size - 1)
    return Broadcast(comm, root=root)(x)


def copy_to_parallel_region(x, comm=None):
    """Identity forward, all-reduce (sum) of the gradient backward."""
    return CopyToParallelRegion(_comm(comm))(_input("parallel.copy_to_parallel_region", x))


def reduce_from_parallel_region(x, comm=None):
    """All-reduce (sum) forward, identity backward."""
    return ReduceFromParallelRegion(_comm(comm))(
        _input("parallel.reduce_from_parallel_region", x))


def scatter_to_parallel_region(x, axis=-1, comm=None):
    """This rank's chunk of ``x`` along ``axis`` forward, all-gather backward."""
    where = "parallel.scatter_to_parallel_region"
    x = _input(where, x)
    comm = _comm(comm)
    axis = _axis(where, x, axis)
    _chunk(comm, x.data, axis, where)          # checks divisibility before recording
    return ScatterToParallelRegion(comm, axis=axis)(x)


def gather_from_parallel_region(x, axis=-1, comm=None):
    """All-gather along ``axis`` forward, this rank's chunk backward."""
    where = "parallel.gather_from_parallel_region"
    x = _input(where, x)
    return GatherFromParallelRegion(_comm(comm), axis=_axis(where, x, axis))(x)
