"""A rank's life in a job of several: the ranks finish together, or the job ends --
non-zero, with a message naming the rank -- within seconds.

``parallel.init()`` sets up three parts (several ranks, ``abort_on_exception=True``):

* **the guardian** (``guardian.py``): a small process per rank, started before MPI is
  initialised, which aborts the job when its rank dies without running any Python
  (SIGKILL, ``os._exit``, a crash in native code) or when MPI initialisation does not
  finish within ``init_timeout`` seconds (a rank never called ``init``).  It needs the
  launcher's PMI socket (``PMI_FD``: MPICH's hydra); without one this part is skipped.
* **the finish handshake** (``atexit``): a rank whose script ends -- normally, or by
  ``sys.exit(n)`` -- sends every other rank an exit notice on the side channel and waits,
  answering stall queries, until every rank has sent one; only then does MPI finalise.  If
  the others do not all finish within the world's ``timeout``, it aborts naming them.
* **departures** (``poll``, called by every waiting loop): a rank that waits for an
  operation which needs a rank that has sent its exit notice -- that rank will never take
  part -- prints a message naming it and aborts the job, after a grace of ``1 s`` for
  messages already on their way.

Every abort first removes the job's leftover files (``leftovers.py``).
"""
import atexit
import os
import subprocess
import sys
import time

from lezero.parallel import failure, leftovers, stall

EXIT_TAG = 31003                  # exit notices on the world's side channel
_GRACE_S = 1.0
_life = None


class _Life:
    """This process's part: its guardian, its world, the ranks that have left."""

    def __init__(self):
        self.pid = os.getpid()
        self.pipe = None          # write end of the guardian's pipe
        self.guardian = None
        self.world = None
        self.departed = {}        # world rank -> its exit notice
        self.finishing = False
        self.doomed_since = None  # when a pending wait first needed a departed rank
        self.files = set()

    def tell(self, line):
        if self.pipe is None:
            return
        try:
            os.write(self.pipe, (line + "\n").encode())
        except OSError:           # the guardian is gone: nothing to tell
            self.pipe = None


def _pmi_fd():
    """The launcher's PMI socket of this rank (MPICH's hydra sets ``PMI_FD``), or None."""
    text = os.environ.get("PMI_FD", "")
    if not text.isdigit() or not os.environ.get("PMI_RANK", "").isdigit():
        return None
    try:
        os.fstat(int(text))
    except OSError:
        return None
    return int(text)


def start(size, init_timeout):
    """Before MPI is initialised: start this rank's guardian (once)."""
    global _life
    if _life is not None:
        return
    _life = _Life()
    fd = _pmi_fd()
    if fd is None:
        return
    read, write = os.pipe()
    files = sorted(leftovers.launcher_files())
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "guardian.py")
    args = [sys.executable, "-I", script, os.environ["PMI_RANK"], str(size), str(os.getpid()),
            str(fd), str(read), repr(float(init_timeout)), *files]
    try:
        _life.guardian = subprocess.Popen(args, pass_fds=(fd, read),
                                          stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    except OSError:
        os.close(write)
        return
    finally:
        os.close(read)
    _life.pipe = write
    _life.files.update(files)


def attach(world):
    """After MPI is initialised: register the finish handshake for ``world``."""
    if _life is None or _life.world is not None:
        return
    _life.world = world
    note_files()
    _life.tell("init")
    atexit.register(_at_exit)


def note_files():
    """Tell the guardian about this job's files created since (new shared memory)."""
    if _life is None or _life.pipe is None or os.getpid() != _life.pid:
        return
    for path in sorted(set(leftovers.own_files()) - _life.files):
        _life.files.add(path)
        _life.tell(f"file {path}")


def before_abort():
    """Called by ``abort()``: quiet the guardian, remove the job's leftover files."""
    if _life is not None and os.getpid() == _life.pid:
        _life.tell("abort")
    leftovers.remove(leftovers.own_files())


def reset():
    """Forget everything (tests of the one-process world start from scratch)."""
    global _life
    atexit.unregister(_at_exit)
    _life = None


# ----- departures ---------------------------------------------------------------------
def _receive_notices(life):
    from lezero.parallel._mpi import import_mpi
    ctrl = life.world._tracker.ctrl
    status = import_mpi().Status()
    while ctrl.Iprobe(source=import_mpi().ANY_SOURCE, tag=EXIT_TAG, status=status):
        source = status.Get_source()
        life.departed[source] = ctrl.recv(source=source, tag=EXIT_TAG)


def _needs_departed(request, life):
    """The departed world rank that ``request`` waits for, or None."""
    tracker = request.tracker
    if tracker is None:
        return None
    members = tracker.world_ranks or range(tracker.size)
    needed = members if request.peer is None else [members[request.peer]]
    return next((r for r in needed if r in life.departed), None)


def poll(pending):
    """In a waiting loop: abort when a pending request needs a rank that has left."""
    life = _life
    if life is None or life.world is None or os.getpid() != life.pid:
        return
    _receive_notices(life)
    if not life.departed or life.finishing:
        return
    found = next(((r, g) for r in pending
                  for g in [_needs_departed(r, life)] if g is not None), None)
    now = time.perf_counter()
    if found is None:
        life.doomed_since = None
    elif life.doomed_since is None:
        life.doomed_since = now
    elif now - life.doomed_since >= _GRACE_S:
        _abort_departed(life, *found)


def _abort_departed(life, request, gone):
    world, notice = life.world, life.departed[gone]
    where = request.tracker.name
    on = "" if where == world.name else f" on communicator '{where}'"
    text = (f"[lezero.parallel] rank {gone} of {world.size} left the job -- its script "
            f"ended or called sys.exit() (its last collective: {notice['last'] or 'none'})"
            f" -- while rank {world.rank} waits for {request.label}{on}, which needs it; "
            f"aborting all {world.size} ranks.")
    if "bucket" in request.what:
        text += "\n" + stall.BUCKET_HINT
    failure.abort_job(world, text)


# ----- the finish handshake -----------------------------------------------------------
def _at_exit():
    life = _life
    if life is None or life.world is None or os.getpid() != life.pid:
        return
    from lezero.parallel._mpi import import_mpi
    if import_mpi().Is_finalized():
        life.tell("ok")
        return
    try:
        _finish(life)
    except Exception as e:        # never leave the others waiting without a word
        failure.abort_job(life.world, f"[lezero.parallel] rank {life.world.rank} could "
                                      f"not finish the job cleanly ({e!r}); aborting")
    life.tell("ok")
    if life.guardian is not None:          # it exits at once: reap it
        try:
            life.guardian.wait(timeout=2)
        except subprocess.TimeoutExpired:
            pass


def _finish(life):
    """Send the exit notice; wait for every other rank's (or abort past the timeout)."""
    world = life.world
    tracker = world._tracker
    life.finishing = True
    notice = {"rank": world.rank, "last": tracker.last}
    sends = [tracker.ctrl.isend(notice, dest=r, tag=EXIT_TAG)
             for r in range(world.size) if r != world.rank]
    start = time.perf_counter()
    tracker.waiting = ("the end of the job (its script has finished)", start)
    while sends or len(life.departed) < world.size - 1:
        stall.service_all()
        _receive_notices(life)
        sends = [s for s in sends if not s.Test()]
        if time.perf_counter() - start > world.timeout:
            _finish_timeout(life)
        time.sleep(0.002)
    tracker.waiting = None


def _finish_timeout(life):
    world = life.world
    missing = [r for r in range(world.size) if r != world.rank and r not in life.departed]
    answers = world._tracker.ask_others()
    lines = [f"[lezero.parallel] rank {world.rank} of {world.size} reached the end of its "
             f"script, but rank(s) {missing} did not finish within {world.timeout:g} s (the "
             f"world's timeout); aborting all {world.size} ranks."]
    lines += ["  " + stall.describe_peer(r, answers.get(r), None, None)[0] for r in missing]
    failure.abort_job(world, "\n".join(lines))
