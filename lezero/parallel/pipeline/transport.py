"""Activations and gradients between pipeline stages, over the communicator's send/recv.

Each message is two sends on the same tag: a small int64 header (dtype and shape), then
the array -- so the receiver allocates the right buffer without knowing the stage's
output shape in advance (MPI keeps two messages with the same source, tag and
communicator in order).  Sends are non-blocking and waited at the end of the step
(``flush``); receives block, with the communicator's timeout and stall report.  A
message between two virtual stages on the same rank (interleaved, or one rank) is handed
over in memory.

Tags: one per (micro-batch, sending stage, kind), so messages match by tag whatever
order the two ranks post them in.
"""
import numpy as np

from lezero import cuda
from lezero.parallel import accounting

_HEADER = 10                  # ndim, dtype code, up to 8 dimensions
_DTYPES = ("float32", "float64", "float16", "bfloat16", "int64", "int32", "bool", "uint8")
MAX_TAG = 30000
ACTIVATION, GRADIENT = 0, 1


def tag(micro_batch, stage, stages, kind):
    """The message tag of ``kind`` sent by ``stage`` for ``micro_batch``."""
    return 1 + 2 * (micro_batch * stages + stage) + kind


def check_tags(micro_batches, stages):
    if tag(micro_batches - 1, stages - 1, stages, GRADIENT) > MAX_TAG:
        raise ValueError(f"Pipeline: {micro_batches} micro-batches x {stages} stages need "
                         f"more message tags than the communicator allows ({MAX_TAG}); use "
                         "fewer micro-batches")


def _dtype(code):
    name = _DTYPES[code]
    if name == "bfloat16":
        import ml_dtypes
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def _code(dtype):
    name = np.dtype(dtype).name
    if name not in _DTYPES:
        raise TypeError(f"Pipeline: cannot send an array of dtype {name} between stages "
                        f"(supported: {', '.join(_DTYPES)})")
    return _DTYPES.index(name)


def _parse_header(header, source, tag_):
    """(shape, dtype) of a message header, each field checked before use."""
    ndim, code = int(header[0]), int(header[1])
    dims = [int(n) for n in header[2:2 + ndim]] if 0 <= ndim <= _HEADER - 2 else []
    if not 0 <= ndim <= _HEADER - 2 or not 0 <= code < len(_DTYPES) or min(dims, default=0) < 0:
        raise ValueError(f"Pipeline: the message header from rank {source} (tag {tag_}) is "
                         f"not one a stage sends (ndim {ndim}, dtype code {code}, shape "
                         f"{dims}); the ranks do not run the same pipeline")
    return tuple(dims), _dtype(code)


class StageLink:
    """Point-to-point messages of one pipeline over ``comm``."""

    def __init__(self, comm):
        self.comm = comm
        self._pending = []          # isend requests not yet waited
        self._local = {}            # tag -> array, messages to this rank itself

    def send(self, array, dest, tag_):
        if dest == self.comm.rank:
            self._local[tag_] = array
            return
        if array.ndim > _HEADER - 2:
            raise ValueError(f"Pipeline: a stage output of {array.ndim} dimensions is more "
                             f"than the {_HEADER - 2} a message header holds")
        header = np.zeros(_HEADER, np.int64)
        header[0], header[1] = array.ndim, _code(array.dtype)
        header[2:2 + array.ndim] = array.shape
        array = cuda.get_array_module(array).ascontiguousarray(array)
        if accounting._active:
            accounting.record(accounting.current_scope(), "pipeline", "send", self.comm,
                              array.nbytes)
        self._pending.append(self.comm.isend(header, dest, tag_))
        self._pending.append(self.comm.isend(array, dest, tag_))
        self._pending = [r for r in self._pending if not r.test()]

    def recv(self, source, tag_, xp=np):
        if source == self.comm.rank:
            if tag_ not in self._local:
                raise RuntimeError(f"Pipeline: rank {source} waits for its own message "
                                   f"(tag {tag_}) that was never sent; the schedule is not "
                                   "the one that was checked")
            return self._local.pop(tag_)
        header = self.comm.recv(np.empty(_HEADER, np.int64), source, tag_)
        shape, dtype = _parse_header(header, source, tag_)
        return self.comm.recv(xp.empty(shape, dtype), source, tag_)

    def flush(self):
        """Wait for every send of this step."""
        from lezero.parallel.requests import wait_all
        wait_all(self._pending)
        self._pending = []
        self._local.clear()
