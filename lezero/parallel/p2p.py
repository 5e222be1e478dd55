"""Point-to-point messages and Python objects: the part of ``Communicator`` that is not
an array collective.

``send``/``recv`` (and ``isend``/``irecv``) move arrays between two ranks through the
buffer API.  ``bcast_object``/``allgather_object`` carry small Python objects (metadata,
RNG states, stall answers): pickled into bytes, which then travel as uint8 arrays through
the same collectives, with the same timeouts and stall reports.
"""
import pickle

import numpy as np

from lezero import cuda
from lezero.parallel import agree, wire
from lezero.utils.checks import check_int


class PointToPoint:
    """Mixed into ``Communicator`` (which provides ``_array``, ``_request`` ...)."""

    def isend(self, x, dest, tag=0):
        """Start sending ``x`` to rank ``dest``; do not modify ``x`` before ``wait()``."""
        where = "Communicator.send"
        arr, _ = self._array(where, x)
        dest = self._root(where, dest, "dest")
        tag = check_int(where, "tag", tag, 0, 30000)
        wdt, bits = wire.plan(arr.dtype, False)
        buf = wire.to_wire(arr, wdt, bits, self.cuda_aware)

        def finish(keep=buf):          # the buffer must live until the send completes
            return None

        return self._request("send", self._detail(arr, f"to rank {dest}, tag {tag}"),
                             finish, collective=False, p2p=(agree.start_send, arr), send=buf,
                             peer=dest, tag=tag)

    def send(self, x, dest, tag=0):
        """Send ``x`` to rank ``dest`` (which calls ``recv`` with a buffer like it)."""
        self.isend(x, dest, tag).wait()

    def irecv(self, buf, source, tag=0):
        """Start receiving into the array ``buf``; ``wait()`` returns ``buf``."""
        where = "Communicator.recv"
        arr, _ = self._array(where, buf)
        source = self._root(where, source, "source")
        tag = check_int(where, "tag", tag, 0, 30000)
        xp = cuda.get_array_module(arr)
        wdt, bits = wire.plan(arr.dtype, False)
        wbuf = arr if self._direct(arr, wdt) else wire.empty_wire(arr.shape, wdt, xp,
                                                                   self.cuda_aware)

        def finish():
            return arr if wbuf is arr else wire.from_wire(wbuf, arr.dtype, bits, xp, arr)

        return self._request("recv", self._detail(arr, f"from rank {source}, tag {tag}"),
                             finish, collective=False, p2p=(agree.start_recv, arr),
                             recv=wbuf, peer=source, tag=tag)

    def recv(self, buf, source, tag=0):
        """Receive an array sent by rank ``source`` into ``buf`` (its shape and dtype must
        match the sent array's: checked, a ``ValueError`` otherwise); returns ``buf``."""
        return self.irecv(buf, source, tag).wait()

    # ----- Python objects (pickled into bytes, then the buffer path) ----------------
    def bcast_object(self, obj=None, root=0):
        """Root's Python object on every rank."""
        root = self._root("Communicator.bcast_object", root)
        data = _pickle(obj) if self.rank == root else np.empty(0, np.uint8)
        n = self.bcast(np.array([data.size], np.int64), root)
        if self.rank != root:
            data = np.empty(int(n[0]), np.uint8)
        return pickle.loads(self.bcast(data, root).tobytes())

    def allgather_object(self, obj):
        """A list of every rank's Python object, in rank order."""
        data = _pickle(obj)
        sizes = self.allgather(np.array([data.size], np.int64))[:, 0]
        padded = np.zeros(int(sizes.max()), np.uint8)
        padded[:data.size] = data
        rows = self.allgather(padded)
        return [pickle.loads(rows[r, :int(sizes[r])].tobytes()) for r in range(self.size)]


def _pickle(obj):
    return np.frombuffer(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL), np.uint8)
