"""``Communicator``: a group of ranks and the operations between them.

The public methods check their arguments and arrange the buffers; a backend (MPI in
``mpi_backend.py``, the one-process world in ``local.py``) only starts the raw
operation.  Every operation is non-blocking underneath: the ``i``-methods return a
``Request``, the plain ones wait on it -- with the communicator's ``timeout`` and a stall
report past it (``requests.py``, ``stall.py``).

Arrays are NumPy or CuPy arrays (a Variable gives its ``.data``; use the differentiable
``parallel.all_reduce`` ... to keep the graph).  Python numbers are accepted by the
reductions and come back as numbers.  Arrays never go through pickle; only the
``*_object`` methods carry Python objects (pickled, as bytes through the same buffers).
"""
import numpy as np

from lezero import cuda
from lezero.backends import get_backend
from lezero.core import Variable
from lezero.parallel import agree, stall, wire
from lezero.parallel.p2p import PointToPoint
from lezero.parallel.requests import Request
from lezero.utils.checks import check_bool, check_choice, check_int, check_number, describe

OPS = ("sum", "mean", "max", "min", "prod")


class Communicator(PointToPoint):
    """``rank`` (this process, 0..size-1) of ``size`` ranks; see the module docstring.

    ``timeout``: seconds any wait may last before a stall report (settable).
    ``check_collectives``: check that the ranks agree on each operation before data moves
    (``agree.py``; settable, the same on every rank).
    """

    backend = "base"

    def __init__(self, rank, size, name, timeout, ctrl=None, cuda_aware=False):
        self.rank, self.size, self.name = int(rank), int(size), name
        self.cuda_aware = bool(cuda_aware)
        self._tracker = stall.Tracker(name, self.rank, self.size, float(timeout), ctrl)
        self._check = agree.enabled_by_default()

    # ----- what a backend provides ---------------------------------------------------
    def _start(self, kind, send=None, recv=None, op=None, peer=None, tag=0):
        """Start one raw operation; return a raw request with ``Test()``, or None when it
        completed already."""
        raise NotImplementedError

    def _split(self, color, key, name):
        raise NotImplementedError

    def _start_ctrl(self, kind, send=None, recv=None, peer=None, tag=0):
        """Start an operation on the side channel ("max", "allgather", "send", "recv"):
        the agreement checks' traffic, which never mixes with data."""
        raise NotImplementedError

    def abort(self, code=1):
        """End every rank of the job now (MPI_Abort); a last resort after an error."""
        raise NotImplementedError

    # ----- settings -----------------------------------------------------------------
    @property
    def timeout(self):
        return self._tracker.timeout

    @timeout.setter
    def timeout(self, seconds):
        self._tracker.timeout = check_number("Communicator", "timeout", seconds, 0,
                                             low_open=True)

    @property
    def check_collectives(self):
        return self._check

    @check_collectives.setter
    def check_collectives(self, value):
        self._check = check_bool("Communicator", "check_collectives", value)

    def __repr__(self):
        return (f"<Communicator '{self.name}' rank {self.rank} of {self.size} "
                f"({self.backend})>")

    # ----- helpers ------------------------------------------------------------------
    def _array(self, where, x, numbers=False):
        """(array, was_a_number) for a Variable, an ndarray or (when allowed) a number."""
        if isinstance(x, Variable):
            return x.data, False
        if isinstance(x, cuda.array_types()):
            return x, False
        if numbers and isinstance(x, (int, float, complex, np.generic)) \
                and not isinstance(x, bool):
            return np.asarray(x), True
        kinds = "a Variable, an ndarray or a number" if numbers else "a Variable or an ndarray"
        raise TypeError(f"{where}: x must be {kinds}, got {describe(x)}")

    def _root(self, where, root, name="root"):
        return check_int(where, name, root, 0, self.size - 1)

    def _axis(self, where, axis, ndim):
        axis = check_int(where, "axis", axis, -ndim if ndim else 0, max(ndim - 1, 0))
        if ndim == 0:
            raise ValueError(f"{where}: axis={axis} needs an array with at least one axis, "
                             "got a 0-d array")
        return axis % ndim

    def _out(self, where, out, shape, dtype):
        if out is None:
            return None
        if not isinstance(out, cuda.array_types()):
            raise TypeError(f"{where}: out must be an ndarray, got {describe(out)}")
        if out.shape != tuple(shape) or out.dtype != dtype:
            raise ValueError(f"{where}: out must have shape {tuple(shape)} and dtype {dtype}, "
                             f"got {out.shape} {out.dtype}")
        return out

    def _direct(self, arr, wire_dtype):
        """True when MPI may use ``arr``'s own memory (no conversion, no staging)."""
        return (arr.dtype == wire_dtype and arr.flags.c_contiguous
                and (get_backend(arr).is_host or self.cuda_aware))

    def _reduced(self, recv, op, dtype, bits, xp, out=None):
        """A reduction's received buffer as the result: divided for "mean", converted
        back to ``dtype`` on ``xp``'s device (into ``out`` when given)."""
        if op == "mean" and self.size > 1:
            recv[...] = recv / self.size
        return wire.from_wire(recv, dtype, bits, xp, out)

    def _checking(self):
        return self._check and self.size > 1

    def _request(self, kind, detail, finish, collective=True, check=None, p2p=None, **start):
        """Start ``kind`` as a Request.  ``check=(array, options)``: a collective whose
        ranks must agree on both (checked first, ``agree.py``); ``p2p=(starter, array)``:
        a send or receive that carries or checks a header."""
        seq = self._tracker.enter(kind, detail) if collective else None
        what = f"{kind} ({detail})"
        if check is not None and self._checking():
            agree.check_collective(self, kind, seq, what, *check)
        if p2p is not None and self._checking():
            raw = p2p[0](self, p2p[1], lambda: self._start(kind, **start), start["peer"],
                         start["tag"])
        else:
            raw = self._start(kind, **start)
        peer = None if collective else start.get("peer")
        return Request(raw, finish, self._tracker, seq, what, peer)

    @staticmethod
    def _detail(arr, extra=""):
        shape = "x".join(map(str, arr.shape)) or "scalar"
        text = f"{arr.dtype}[{shape}], {wire.nbytes_text(arr.nbytes)}"
        return f"{extra}, {text}" if extra else text

    # ----- reductions ---------------------------------------------------------------
    def iallreduce(self, x, op="sum", out=None, label="", check=True):
        """Start ``allreduce``; the Request's ``wait()`` returns the result.
        ``label`` names the operation in stall reports ("bucket 2 of 5").  ``check=False``
        skips the agreement check for this call (for arrays whose shapes agree by
        construction, as DataParallel's buckets)."""
        where = "Communicator.iallreduce"
        arr, _ = self._array(where, x)
        check = check_bool(where, "check", check)
        return self._iallreduce(where, arr, op, out, label, check)

    def _iallreduce(self, where, arr, op, out, label, check=True):
        op = check_choice(where, "op", op, OPS)
        _check_reducible(where, arr.dtype, op)
        out = self._out(where, out, arr.shape, arr.dtype)
        xp = cuda.get_array_module(arr)
        wdt, bits = wire.plan(arr.dtype, True)
        in_place = out is arr and self._direct(arr, wdt)
        send = None if in_place else wire.to_wire(arr, wdt, bits, self.cuda_aware)
        recv = arr if in_place else wire.empty_wire(arr.shape, wdt, xp, self.cuda_aware)

        def finish():
            return self._reduced(recv, op, arr.dtype, bits, xp, out)

        detail = self._detail(arr, ", ".join(s for s in (label, op) if s))
        return self._request("allreduce", detail, finish, check=(arr, op) if check else None,
                             send=send, recv=recv, op=op)

    def allreduce(self, x, op="sum", out=None):
        """Combine ``x`` over all ranks with ``op`` ("sum", "mean", "max", "min", "prod")
        and return the result on every rank.  ``out=x`` reduces in place.  A Python
        number gives a number back."""
        where = "Communicator.allreduce"
        arr, scalar = self._array(where, x, numbers=True)
        if scalar and op == "mean" and arr.dtype.kind in "biu":
            arr = arr.astype(np.float64)
        result = self._iallreduce(where, arr, op, out, "").wait()
        return result.item() if scalar else result

    def ireduce(self, x, op="sum", root=0):
        """Start ``reduce``: the result (on ``root``, None elsewhere) from ``wait()``."""
        where = "Communicator.reduce"
        arr, _ = self._array(where, x)
        op = check_choice(where, "op", op, OPS)
        _check_reducible(where, arr.dtype, op)
        root = self._root(where, root)
        xp = cuda.get_array_module(arr)
        wdt, bits = wire.plan(arr.dtype, True)
        send = wire.to_wire(arr, wdt, bits, self.cuda_aware)
        mine = self.rank == root
        recv = wire.empty_wire(arr.shape, wdt, xp, self.cuda_aware) if mine else None

        def finish():
            return self._reduced(recv, op, arr.dtype, bits, xp) if mine else None

        return self._request("reduce", self._detail(arr, f"{op} to rank {root}"), finish,
                             check=(arr, f"{op} to rank {root}"), send=send, recv=recv,
                             op=op, peer=root)

    def reduce(self, x, op="sum", root=0):
        """Combine ``x`` over all ranks onto ``root``; returns the result there, None on
        the other ranks."""
        return self.ireduce(x, op, root).wait()

    def ireduce_scatter(self, x, op="sum", axis=0):
        """Start ``reduce_scatter``; ``wait()`` returns this rank's chunk."""
        where = "Communicator.reduce_scatter"
        arr, _ = self._array(where, x)
        op = check_choice(where, "op", op, OPS)
        _check_reducible(where, arr.dtype, op)
        blocks, chunk_shape, axis = self._blocks(where, arr, axis)
        xp = cuda.get_array_module(arr)
        wdt, bits = wire.plan(arr.dtype, True)
        send = wire.to_wire(blocks, wdt, bits, self.cuda_aware)
        recv = wire.empty_wire(chunk_shape, wdt, xp, self.cuda_aware)

        def finish():
            return self._reduced(recv, op, arr.dtype, bits, xp)

        return self._request("reduce_scatter", self._detail(arr, f"{op}, axis {axis}"),
                             finish, check=(arr, f"{op}, axis {axis}"), send=send, recv=recv,
                             op=op)

    def reduce_scatter(self, x, op="sum", axis=0):
        """Reduce ``x`` over the ranks and give rank r the r-th of ``size`` equal chunks
        along ``axis`` (whose length must divide by ``size``)."""
        return self.ireduce_scatter(x, op, axis).wait()

    def _blocks(self, where, arr, axis):
        """``arr`` cut into ``size`` chunks along ``axis``, stacked first (MPI's layout)."""
        axis = self._axis(where, axis, arr.ndim)
        n = arr.shape[axis]
        if n % self.size:
            raise ValueError(f"{where}: axis {axis} has length {n}, which does not divide "
                             f"into {self.size} equal chunks (one per rank)")
        xp = cuda.get_array_module(arr)
        shape = arr.shape[:axis] + (self.size, n // self.size) + arr.shape[axis + 1:]
        blocks = xp.moveaxis(arr.reshape(shape), axis, 0)
        return blocks, blocks.shape[1:], axis

    # ----- copies -------------------------------------------------------------------
    def ibcast(self, x, root=0):
        """Start ``bcast``; ``wait()`` returns ``x`` once it holds root's values."""
        where = "Communicator.bcast"
        arr, _ = self._array(where, x)
        root = self._root(where, root)
        xp = cuda.get_array_module(arr)
        wdt, bits = wire.plan(arr.dtype, False)
        if self._direct(arr, wdt):
            buf = arr
        elif self.rank == root:
            buf = wire.to_wire(arr, wdt, bits, self.cuda_aware)
        else:
            buf = wire.empty_wire(arr.shape, wdt, xp, self.cuda_aware)

        def finish():
            return arr if buf is arr else wire.from_wire(buf, arr.dtype, bits, xp, arr)

        return self._request("bcast", self._detail(arr, f"from rank {root}"), finish,
                             check=(arr, f"from rank {root}"), recv=buf, peer=root)

    def bcast(self, x, root=0):
        """Overwrite ``x`` on every rank with root's ``x`` (same shape and dtype
        everywhere); returns ``x``.  For Python objects use ``bcast_object``."""
        return self.ibcast(x, root).wait()

    def iallgather(self, x, axis=None):
        """Start ``allgather``; ``wait()`` returns the gathered array."""
        where = "Communicator.allgather"
        arr, _ = self._array(where, x)
        if axis is not None:
            axis = self._axis(where, axis, arr.ndim)
        xp = cuda.get_array_module(arr)
        wdt, bits = wire.plan(arr.dtype, False)
        send = wire.to_wire(arr, wdt, bits, self.cuda_aware)
        recv = wire.empty_wire((self.size,) + arr.shape, wdt, xp, self.cuda_aware)

        def finish():
            out = wire.from_wire(recv, arr.dtype, bits, xp)
            if axis is None:
                return out
            shape = arr.shape[:axis] + (arr.shape[axis] * out.shape[0],) + arr.shape[axis + 1:]
            return xp.moveaxis(out, 0, axis).reshape(shape)

        return self._request("allgather", self._detail(arr), finish,
                             check=(arr, f"axis {axis}"), send=send, recv=recv)

    def allgather(self, x, axis=None):
        """Every rank's ``x`` (equal shapes): stacked on a new first axis (``axis=None``,
        shape ``(size, *x.shape)``) or concatenated along ``axis`` in rank order."""
        return self.iallgather(x, axis).wait()

    def ialltoall(self, x, axis=0):
        """Start ``alltoall``; ``wait()`` returns the exchanged array."""
        where = "Communicator.alltoall"
        arr, _ = self._array(where, x)
        blocks, _, axis = self._blocks(where, arr, axis)
        xp = cuda.get_array_module(arr)
        wdt, bits = wire.plan(arr.dtype, False)
        send = wire.to_wire(blocks, wdt, bits, self.cuda_aware)
        recv = wire.empty_wire(blocks.shape, wdt, xp, self.cuda_aware)

        def finish():
            got = wire.from_wire(recv, arr.dtype, bits, xp)
            return xp.moveaxis(got, 0, axis).reshape(arr.shape)

        return self._request("alltoall", self._detail(arr, f"axis {axis}"), finish,
                             check=(arr, f"axis {axis}"), send=send, recv=recv)

    def alltoall(self, x, axis=0):
        """Cut ``x`` into ``size`` chunks along ``axis``, send chunk j to rank j, and
        return the chunks received, concatenated along ``axis`` in rank order."""
        return self.ialltoall(x, axis).wait()

    def ibarrier(self):
        """Start a barrier; ``wait()`` returns once every rank has entered it."""
        return self._request("barrier", f"{self.size} ranks", None, check=(None, ""))

    def barrier(self):
        """Wait until every rank has reached this barrier."""
        self.ibarrier().wait()

    # ----- sub-groups ---------------------------------------------------------------
    def split(self, color, key=None, name=None):
        """Collective: ranks with the same ``color`` (an int >= 0) form a new
        Communicator, ordered by ``key`` (default: this rank).  ``color=None`` joins no
        group and gets None back."""
        where = "Communicator.split"
        color = check_int(where, "color", color, 0, allow_none=True)
        key = self.rank if key is None else check_int(where, "key", key)
        name = name or f"{self.name}/{color}"
        if self._checking():         # Split blocks inside MPI: agree first, with a timeout
            seq = self._tracker.enter("split", name)
            agree.check_collective(self, "split", seq, f"split ({name})")
        sub = self._split(color, key, name)
        if sub is not None:
            sub._check = self._check
        return sub


def _check_reducible(where, dtype, op):
    if dtype == np.bool_ and op in ("sum", "mean", "prod"):
        raise TypeError(f"{where}: op={op!r} on a bool array; cast it to an integer dtype "
                        "first (op 'max' is a logical or, 'min' a logical and)")
    if op == "mean" and np.dtype(dtype).kind in "biu":
        raise TypeError(f"{where}: op='mean' needs a floating-point array, got dtype "
                        f"{dtype} (sum it and divide, or cast it first)")
