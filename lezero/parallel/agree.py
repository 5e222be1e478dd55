"""Agreement checks: before data moves, the ranks confirm they called the same operation
on arrays of the same shape and dtype -- else every rank raises ``ValueError``.

MPI matches collectives by their position on the communicator only.  An all-reduce of
float32[4] on one rank against float32[8] on another reads past a buffer, float32 against
float64 returns garbage, 4 elements against 100000 hangs.  So a checked collective first
all-reduces a small signature of fixed size (operation, dtype, shape, and the options
that must agree: op, root, axis) with MAX over ``[s, -s]`` on the communicator's side
channel.  That round has the same size on every rank whatever each one called, and every
rank gets the same result, so on a mismatch *every* rank raises and none is left waiting.
Only then does the data operation start.  On a mismatch the ranks also exchange a short
text of what each called, so the error names both sides.

Point to point: ``isend`` sends the same kind of text as a header on the side channel
(same tag; MPI keeps the order per source, tag and communicator) and ``irecv`` receives
it with the data.  A message of another shape or dtype is a ``ValueError`` on the
receiver that names both ranks; the message is consumed (truncated by MPI, never written
past the buffer), so the sender completes and is not left waiting.

Cost: one all-reduce of 12 int64 per collective, one 256-byte message per send.
DataParallel's gradient buckets skip it (their layout agrees by construction, checked
once when wrapping).  ``LEZERO_CHECK_COLLECTIVES=0``, ``parallel.init(
check_collectives=False)`` or ``comm.check_collectives = False`` turn it off; the setting
must be the same on every rank.
"""
import os
import zlib

import numpy as np

_KINDS = ("allreduce", "reduce", "bcast", "allgather", "reduce_scatter", "alltoall",
          "barrier", "split")
_TEXT = 256                       # bytes of the text that describes a call


def enabled_by_default():
    """``LEZERO_CHECK_COLLECTIVES`` ("1" by default; "0" turns the checks off)."""
    text = os.environ.get("LEZERO_CHECK_COLLECTIVES", "1").strip()
    if text not in ("0", "1"):
        raise ValueError(f"LEZERO_CHECK_COLLECTIVES must be 0 or 1, got {text!r}")
    return text == "1"


def array_text(arr):
    """"float32[4x8]": what a rank passes, as the error messages show it."""
    if arr is None:
        return "no array"
    return f"{arr.dtype}[{'x'.join(map(str, arr.shape)) or 'scalar'}]"


def _crc(text):
    return zlib.crc32(text.encode())


def signature(kind, arr=None, options=""):
    """(int64 signature, text) of one collective call."""
    dtype = "" if arr is None else f"{arr.dtype.str}/{arr.dtype.name}"
    shape = () if arr is None else tuple(arr.shape)
    vec = np.array([1 + _KINDS.index(kind), _crc(dtype), len(shape),
                    int(np.prod(shape, dtype=np.int64)), _crc(repr(shape)), _crc(options)],
                   np.int64)
    text = kind + (f" ({options})" if options else "")
    if arr is not None:
        text += f" of {array_text(arr)}"
    return vec, text


def _encode(text):
    out = np.zeros(_TEXT, np.uint8)
    raw = text.encode()[:_TEXT]
    out[:len(raw)] = np.frombuffer(raw, np.uint8)
    return out


def _decode(row):
    return bytes(row).rstrip(b"\0").decode("utf-8", "replace")


def _ranks(ranks):
    return f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {ranks}"


def check_collective(comm, kind, seq, what, arr=None, options=""):
    """Raise ``ValueError`` on every rank of ``comm`` unless all of them called ``kind``
    with the same signature.  Waits like the collective itself (timeout, stall report)."""
    from lezero.parallel.requests import Request
    vec, text = signature(kind, arr, options)
    both = np.concatenate([vec, -vec])
    out = np.empty_like(both)
    Request(comm._start_ctrl("max", send=both, recv=out), None, comm._tracker, seq,
            what).wait()
    if np.array_equal(out[:vec.size], -out[vec.size:]):
        return
    rows = np.empty((comm.size, _TEXT), np.uint8)
    Request(comm._start_ctrl("allgather", send=_encode(text), recv=rows), None,
            comm._tracker, seq, what).wait()
    groups = {}
    for rank, row in enumerate(rows):
        groups.setdefault(_decode(row), []).append(rank)
    calls = "; ".join(f"{_ranks(ranks)}: {t}" for t, ranks in groups.items())
    raise ValueError(
        f"Communicator.{kind}: the ranks of communicator '{comm.name}' disagree at "
        f"collective #{seq} ({calls}); every rank must call the same collective, in the "
        "same order, with the same shape, dtype, op, root and axis.  Nothing was sent")


class SendPair:
    """A send with its header: done when both are."""

    def __init__(self, header_raw, data_raw, keep):
        self._raws = [r for r in (header_raw, data_raw) if r is not None]
        self._keep = keep                     # the header buffer lives until sent

    def Test(self):
        self._raws = [r for r in self._raws if not r.Test()]
        return not self._raws


class CheckedRecv:
    """A receive with its header: done when both have arrived; ``verify()`` then raises
    ``ValueError`` when the sender's array differs from the receive buffer."""

    def __init__(self, comm, header_raw, data_raw, header, expected, source, tag):
        self._comm, self._header, self._expected = comm, header, expected
        self._source, self._tag = source, tag
        self._h, self._d = header_raw, data_raw
        self.truncated = None

    def Test(self):
        if self._h is not None and self._h.Test():
            self._h = None
        if self._d is not None:
            try:
                if self._d.Test():
                    self._d = None
            except Exception as e:            # MPI_ERR_TRUNCATE: the message was larger
                self._d, self.truncated = None, e
        return self._h is None and self._d is None

    def verify(self):
        sent = _decode(self._header)
        if sent == self._expected and self.truncated is None:
            return
        if sent == self._expected:
            raise self.truncated
        comm = self._comm
        raise ValueError(
            f"Communicator.recv: rank {self._source} sent {sent} (tag {self._tag}) but "
            f"rank {comm.rank} receives into {self._expected} on communicator "
            f"'{comm.name}'; the receive buffer must have the sent array's shape and "
            "dtype (the message was consumed; the buffer's contents are undefined)")


def start_send(comm, arr, raw_data_start, dest, tag):
    """Start a checked send: the header on the side channel, then the data."""
    header = _encode(array_text(arr))
    head = comm._start_ctrl("send", send=header, peer=dest, tag=tag)
    return SendPair(head, raw_data_start(), header)


def start_recv(comm, arr, raw_data_start, source, tag):
    """Start a checked receive of a header and the data into ``arr``'s wire buffer."""
    header = np.zeros(_TEXT, np.uint8)
    head = comm._start_ctrl("recv", recv=header, peer=source, tag=tag)
    return CheckedRecv(comm, head, raw_data_start(), header, array_text(arr), source, tag)
