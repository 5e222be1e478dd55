"""The one-process world: a ``Communicator`` of size 1 that needs neither mpiexec nor mpi4py.

Every collective of one rank is a copy (a sum over one rank is the value itself), so a
script written for ``mpiexec -n N`` runs unchanged with ``python script.py``.  Messages a
rank sends to itself wait in a mailbox until it receives them; a blocking ``recv`` with
nothing in the mailbox can never be satisfied and raises at once instead of hanging.
"""
from collections import defaultdict, deque

from lezero.parallel.comm import Communicator


class _PendingRecv:
    """A receive posted before the matching send: completes when the mailbox has it."""

    def __init__(self, box, recv):
        self._box, self._recv = box, recv

    def Test(self):
        if not self._box:
            return False
        self._recv[...] = self._box.popleft().reshape(self._recv.shape)
        return True


class LocalCommunicator(Communicator):
    """Rank 0 of a world of one (see the module docstring)."""

    backend = "one process"

    def __init__(self, name="world", timeout=600.0):
        super().__init__(0, 1, name, timeout)
        self._mailbox = defaultdict(deque)     # tag -> arrays sent to ourselves

    def _start(self, kind, send=None, recv=None, op=None, peer=None, tag=0):
        if kind in ("allreduce", "reduce", "reduce_scatter", "alltoall", "allgather"):
            if send is not None:
                recv[...] = send.reshape(recv.shape)
            return None
        if kind == "send":
            self._mailbox[tag].append(send.copy())
            return None
        if kind == "recv":
            box = self._mailbox[tag]
            if box:
                recv[...] = box.popleft().reshape(recv.shape)
                return None
            return _PendingRecv(box, recv)
        return None                          # bcast and barrier: nothing to do

    def recv(self, buf, source, tag=0):
        request = self.irecv(buf, source, tag)
        if not request.done:
            raise RuntimeError(f"Communicator.recv: rank 0 of a one-process world waits for "
                               f"a message with tag {tag} that was never sent (it would wait "
                               "forever); send it first, or use irecv")
        return request.wait()

    def _split(self, color, key, name):
        return None if color is None else LocalCommunicator(name, self.timeout)

    def abort(self, code=1):
        import os
        import sys
        sys.stderr.flush()
        os._exit(code)
