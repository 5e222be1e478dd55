"""Failure handling: one rank's uncaught exception ends the whole job, with its traceback.

Without this, an exception on rank 1 ends rank 1 only; the other ranks wait forever in
their next collective for a partner that is gone.  ``install_excepthook(world)`` (done by
``parallel.init()`` when there are several ranks) replaces ``sys.excepthook``: the
traceback is printed to stderr with the rank's number, then ``MPI_Abort`` brings every
rank down (mpiexec ends the job within a second or two).  ``abort_job`` is the one way
every failure path (this hook, ``lifecycle.py``) ends the job: the message, then the abort.
Ranks that die without running Python, or leave early, are ``lifecycle.py``'s part.
"""
import sys
import time
import traceback

_installed = None


def abort_job(comm, text, code=1):
    """Print ``text`` (one or more lines) to stderr and abort every rank of the job."""
    try:
        sys.stdout.flush()
    except Exception:            # a closed stdout must not hide the message
        pass
    try:
        sys.stderr.write(text.rstrip("\n") + "\n")
        sys.stderr.flush()
    except Exception:
        pass
    time.sleep(0.1)          # the launcher forwards output asynchronously: let it arrive
    comm.abort(code)


def install_excepthook(comm):
    """Abort the job on an uncaught exception in the main thread (idempotent)."""
    global _installed
    if _installed is not None:
        return
    previous = sys.excepthook

    def abort_on_exception(etype, value, tb):
        lines = "".join(traceback.format_exception(etype, value, tb)).rstrip("\n")
        body = "\n".join(f"[rank {comm.rank}] {line}" for line in lines.splitlines())
        abort_job(comm, f"[lezero.parallel] rank {comm.rank} of {comm.size} raised an "
                        f"uncaught exception; aborting all {comm.size} ranks.\n{body}")

    sys.excepthook = abort_on_exception
    _installed = (abort_on_exception, previous)


def uninstall_excepthook():
    """Restore the excepthook that was there before ``install_excepthook``."""
    global _installed
    if _installed is not None and sys.excepthook is _installed[0]:
        sys.excepthook = _installed[1]
    _installed = None
