"""A rank's guardian: a small process that ends the whole job when its rank dies unseen.

A rank killed by a signal (SIGKILL, the OOM killer), one that calls ``os._exit`` or
crashes in native code runs no Python on its way out: no excepthook, no atexit.  With
MPICH's launcher (hydra) the other ranks are then killed at once and ``mpiexec`` exits with
the dead rank's own status -- 0 after ``os._exit(0)``, with rank 0 unfinished -- and no
message says which rank it was.

``parallel.init()`` therefore starts this script next to each rank (``lifecycle.py``):

    python -I guardian.py RANK SIZE PARENT_PID PMI_FD PIPE_FD INIT_DEADLINE [FILE ...]

It holds a copy of the rank's PMI socket (so the launcher does not see the rank go before
the guardian has spoken) and reads lines from a pipe whose other end only the rank holds:

* ``init`` -- MPI is initialised (the INIT_DEADLINE, in seconds, no longer applies);
* ``file PATH`` -- a file of this job to remove if it dies (``leftovers.py``);
* ``ok`` -- the rank finished cleanly (the finish handshake passed): exit quietly;
* ``abort`` -- the rank aborts the job itself and has said why: exit quietly.

When the rank is gone without ``ok`` or ``abort`` (end of file on the pipe, or a new
parent process), or MPI is not initialised by the deadline (some rank never called
``init``), the guardian prints one line naming the rank, removes the job's files, and
sends the PMI ``abort`` command on the rank's socket: the launcher ends every rank and
``mpiexec`` exits with status 1.  It is in the rank's process group, so when the launcher
ends the job it ends too.  Standard library only: it must start in milliseconds and
import nothing of the job's.
"""
import os
import select
import signal
import sys
import time

_POLL_S = 0.1
_FORWARD_S = 0.3
_ALLOWED = ("/dev/shm/mpich_shm_", "hydra_hwloc_xmlfile_")


def _allowed(path):
    """Only files of the kinds ``leftovers.py`` names are ever removed."""
    return os.path.isabs(path) and (path.startswith(_ALLOWED[0])
                                    or os.path.basename(path).startswith(_ALLOWED[1]))


def _watch(parent, pipe_fd, deadline, files):
    """Read the rank's lines until it finishes ("quiet") or is gone ("died", "init")."""
    pending = b""
    while True:
        ready, _, _ = select.select([pipe_fd], [], [], _POLL_S)
        if ready:
            data = os.read(pipe_fd, 65536)
            if not data:
                return "died"
            pending += data
            *lines, pending = pending.split(b"\n")
            for line in lines:
                text = line.decode("utf-8", "replace")
                if text in ("ok", "abort"):
                    return "quiet"
                if text == "init":
                    deadline = None
                elif text.startswith("file ") and _allowed(text[5:]):
                    files.add(text[5:])
            continue
        if os.getppid() != parent:
            return "died"
        if deadline is not None and time.monotonic() > deadline:
            return "init"


def _message(reason, rank, size, parent, init_s):
    if reason == "init":
        return (f"[lezero.parallel] rank {rank} of {size}: MPI initialisation did not "
                f"finish within {init_s:g} s -- not every rank has called parallel.init() "
                f"(a rank that never initialises, or ended before it, leaves the others "
                f"waiting there); aborting all {size} ranks.\n")
    return (f"[lezero.parallel] rank {rank} of {size} (pid {parent}) ended without "
            f"finishing the job: it was killed by a signal, called os._exit() or crashed "
            f"in native code (or failed while MPI was starting), so it never reached the "
            f"end of its script; aborting all {size} ranks.\n")


def main(argv):
    signal.signal(signal.SIGINT, signal.SIG_IGN)     # Ctrl-C is for the rank to handle
    rank = argv[0]
    size, parent, pmi_fd, pipe_fd = (int(a) for a in argv[1:5])
    init_s = float(argv[5])
    files = {p for p in argv[6:] if _allowed(p)}
    deadline = time.monotonic() + init_s if init_s > 0 else None
    reason = _watch(parent, pipe_fd, deadline, files)
    if reason == "quiet":
        return 0
    try:
        os.write(2, _message(reason, rank, size, parent, init_s).encode())
    except OSError:
        pass
    for path in files:
        try:
            os.unlink(path)
        except OSError:
            pass
    time.sleep(_FORWARD_S)  # let the launcher forward the message before it ends the job
    try:
        os.write(pmi_fd, f"cmd=abort exitcode=1 message=rank_{rank}_failed\n".encode())
    except OSError:
        return 1
    time.sleep(30)          # the launcher ends the job (and this process) meanwhile
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
