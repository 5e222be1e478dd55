"""Failure handling: one rank's uncaught exception ends the whole job, with its traceback.

Without this, an exception on rank 1 ends rank 1 only; the other ranks wait forever in
their next collective for a partner that is gone.  ``install_excepthook(world)`` (done by
``parallel.init()`` when there are several ranks) replaces ``sys.excepthook``: the
traceback is printed to stderr with the rank's number, then ``MPI_Abort`` brings every
rank down (mpiexec ends the job within a second or two).
"""
import sys
import traceback

_installed = None


def install_excepthook(comm):
    """Abort the job on an uncaught exception in the main thread (idempotent)."""
    global _installed
    if _installed is not None:
        return
    previous = sys.excepthook

    def abort_on_exception(etype, value, tb):
        lines = "".join(traceback.format_exception(etype, value, tb)).rstrip("\n")
        body = "\n".join(f"[rank {comm.rank}] {line}" for line in lines.splitlines())
        try:
            sys.stdout.flush()
        except Exception:        # a closed stdout must not hide the traceback
            pass
        sys.stderr.write(f"[lezero.parallel] rank {comm.rank} of {comm.size} raised an "
                         f"uncaught exception; aborting all {comm.size} ranks.\n{body}\n")
        sys.stderr.flush()
        comm.abort(1)

    sys.excepthook = abort_on_exception
    _installed = (abort_on_exception, previous)


def uninstall_excepthook():
    """Restore the excepthook that was there before ``install_excepthook``."""
    global _installed
    if _installed is not None and sys.excepthook is _installed[0]:
        sys.excepthook = _installed[1]
    _installed = None
