"""The MPI backend: a ``Communicator`` over an mpi4py communicator.

Each operation maps onto MPI-3's non-blocking call (``Iallreduce``, ``Ibcast``,
``Iallgather``, ``Ireduce_scatter_block``, ``Ialltoall``, ``Ibarrier``, ``Ireduce``,
``Isend``, ``Irecv``) on buffers prepared by ``comm.py`` -- the uppercase, buffer API, so
arrays are never pickled.  Stall queries, exit notices and the agreement checks travel on
a duplicate of the communicator (the side channel), so they never mix with data.
"""
from lezero.parallel import _mpi
from lezero.parallel.comm import Communicator


class MPICommunicator(Communicator):
    """A Communicator over ``mpi_comm`` (an ``mpi4py.MPI.Comm``)."""

    backend = "MPI"

    def __init__(self, mpi_comm, name="world", timeout=600.0):
        self.MPI = _mpi.import_mpi()
        self.mpi_comm = mpi_comm
        # The side channel for stall reports: a duplicate never matches data messages.
        ctrl = mpi_comm.Dup() if mpi_comm.Get_size() > 1 else None
        super().__init__(mpi_comm.Get_rank(), mpi_comm.Get_size(), name, timeout, ctrl,
                         cuda_aware=_mpi.cuda_aware(self.MPI))
        self._ops = _mpi.reduce_ops(self.MPI)
        self._tracker.world_ranks = self._world_ranks()

    def _world_ranks(self):
        """The world rank of each of this communicator's ranks (None: it is the world)."""
        world = self.MPI.COMM_WORLD
        if self.mpi_comm == world:
            return None
        return tuple(self.MPI.Group.Translate_ranks(self.mpi_comm.Get_group(),
                                                    list(range(self.size)),
                                                    world.Get_group()))

    def _start(self, kind, send=None, recv=None, op=None, peer=None, tag=0):
        c, MPI = self.mpi_comm, self.MPI
        if kind == "allreduce":
            return c.Iallreduce(MPI.IN_PLACE if send is None else send, recv, self._ops[op])
        if kind == "bcast":
            return c.Ibcast(recv, root=peer)
        if kind == "allgather":
            return c.Iallgather(send, recv)
        if kind == "reduce_scatter":
            return c.Ireduce_scatter_block(send, recv, self._ops[op])
        if kind == "alltoall":
            return c.Ialltoall(send, recv)
        if kind == "barrier":
            return c.Ibarrier()
        if kind == "reduce":
            return c.Ireduce(send, recv, self._ops[op], root=peer)
        if kind == "send":
            return c.Isend(send, dest=peer, tag=tag)
        if kind == "recv":
            return c.Irecv(recv, source=peer, tag=tag)
        raise ValueError(f"MPICommunicator: unknown operation {kind!r}")

    def _start_ctrl(self, kind, send=None, recv=None, peer=None, tag=0):
        c = self._tracker.ctrl
        if kind == "max":
            return c.Iallreduce(send, recv, self.MPI.MAX)
        if kind == "allgather":
            return c.Iallgather(send, recv)
        if kind == "send":
            return c.Isend(send, dest=peer, tag=tag)
        if kind == "recv":
            return c.Irecv(recv, source=peer, tag=tag)
        raise ValueError(f"MPICommunicator: unknown side-channel operation {kind!r}")

    def _split(self, color, key, name):
        color = self.MPI.UNDEFINED if color is None else color
        sub = self.mpi_comm.Split(color, key)
        if sub == self.MPI.COMM_NULL:
            return None
        sub = MPICommunicator(sub, name, self.timeout)
        from lezero.parallel import lifecycle
        lifecycle.note_files()            # a new group may map new shared-memory segments
        return sub

    def abort(self, code=1):
        """End every rank of the job now: tell this rank's guardian, remove the job's
        leftover files (``leftovers.py``), then ``MPI_Abort``."""
        from lezero.parallel import lifecycle
        lifecycle.before_abort()
        self.mpi_comm.Abort(code)
