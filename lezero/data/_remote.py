"""Errors that cross from a DataLoader worker to the main process, and the replies that
carry them.

A worker pickles each reply itself (``encode``) instead of letting the pipe do it: a batch
that cannot be pickled (a lambda in it, an object whose ``__reduce__`` raises) then becomes
that batch's error, reported in the main process with the worker's traceback, and the
worker lives on.  The main process unpickles a reply itself too (``decode``), so a batch
that cannot be rebuilt there is also that batch's error and not a broken pipeline.
"""
import os
import pickle
import traceback
from multiprocessing.reduction import ForkingPickler

__all__ = ["RemoteError", "in_worker", "batch_name", "encode", "decode"]

_MAX_SHOWN_INDICES = 8      # indices quoted in a message before "..."
_MAX_SEARCH_DEPTH = 32      # how deep the search for an unpicklable leaf goes


class RemoteError:
    """An exception met while building or moving a batch, carried to the main process with
    its traceback; ``reraise`` raises it there as the same type when it can be rebuilt
    (``RuntimeError`` otherwise, and for ``SystemExit`` and other non-``Exception``s)."""

    def __init__(self, exc, head):
        self.exc_type = type(exc) if isinstance(exc, Exception) else RuntimeError
        try:
            pickle.dumps(self.exc_type)
        except Exception:          # a class defined inside a function cannot travel
            self.exc_type = RuntimeError
        tb = "".join(traceback.format_exception(exc))
        self.message = f"{head}.\nOriginal traceback:\n{tb}"

    def reraise(self):
        msg = self.message
        if self.exc_type is KeyError:
            msg = _KeyErrorMessage(msg)    # KeyError would print the message as a repr
        try:
            err = self.exc_type(msg)
        except Exception:                  # the type needs other constructor arguments
            err = RuntimeError(msg)
        try:
            raise err
        finally:
            # Drop the local: a frame holding its own exception is a reference cycle that
            # would keep the iterator (and its workers) alive until a GC pass.
            err = None


class _KeyErrorMessage(str):
    def __repr__(self):
        return str(self)


def in_worker(exc, worker_id, where):
    """A ``RemoteError`` for ``exc`` raised in this worker process ``where`` ..."""
    return RemoteError(exc, f"Caught {type(exc).__name__} in DataLoader worker {worker_id} "
                            f"(pid {os.getpid()}) {where}")


def batch_name(idx, indices):
    """``batch 3 (indices [6, 7])``: how messages name a batch."""
    if indices is None:
        return f"batch {idx}"
    try:
        shown = list(indices)
    except TypeError:            # batching off: the sampler's single index
        return f"batch {idx} (index {indices!r})"
    more = ", ..." if len(shown) > _MAX_SHOWN_INDICES else ""
    return f"batch {idx} (indices [{', '.join(map(repr, shown[:_MAX_SHOWN_INDICES]))}{more}])"


def encode(reply, worker_id, indices):
    """The bytes of ``reply`` for the main process; when the batch cannot be pickled, the
    bytes of an error reply for that batch instead (naming where the culprit sits)."""
    try:
        return ForkingPickler.dumps(reply)
    except (Exception, SystemExit) as e:
        culprit = _culprit(reply[4][2], "batch") if reply[0] == "ok" else None
        where = (f"while sending {batch_name(reply[2], indices)} to the main process: the "
                 f"batch cannot be pickled" + (f" ({culprit})" if culprit else ""))
        return ForkingPickler.dumps(("err",) + reply[1:4] + (in_worker(e, worker_id, where),))


def decode(data, worker_id, pid, what):
    """A reply from its bytes; a reply that cannot be unpickled becomes an error reply for
    ``what`` (the batch it was)."""
    try:
        return ForkingPickler.loads(data)
    except Exception as e:
        head = (f"Caught {type(e).__name__} in the main process while unpickling {what} "
                f"from DataLoader worker {worker_id} (pid {pid})")
        return ("err", None, None, None, RemoteError(e, head))


def _picklable(obj):
    try:
        ForkingPickler.dumps(obj)
        return True
    except Exception:
        return False


def _culprit(node, path, depth=0):
    """Where in a batch description the first leaf that cannot be pickled sits, as
    ``batch['x'][1]: ClassName``; None when none is found (within the depth bound)."""
    kind = node[0]
    if kind in ("a", "v"):
        return None
    if kind == "o":
        return None if _picklable(node[1]) else f"{path}: {type(node[1]).__name__}"
    if kind in ("n", "d") and not _picklable(node[1]):
        return f"{path}: its type {node[1].__name__}"
    if depth >= _MAX_SEARCH_DEPTH:
        return None
    children = (enumerate(node[1]) if kind in ("t", "l") else
                enumerate(node[2]) if kind == "n" else node[2])
    for key, child in children:
        hit = _culprit(child, f"{path}[{key!r}]", depth + 1)
        if hit is not None:
            return hit
    return None
