"""Stall reports: when a wait passes its deadline, say which ranks have not arrived.

Each communicator keeps a ``Tracker``: how many collectives this rank has entered on it,
the last one's name, and what it is waiting for now.  A rank whose wait times out sends a
small query to every other rank over a side channel (a duplicate of the communicator, so
queries never mix with data) and gives them a grace period to answer.  Ranks answer from
inside their own waits (every waiting loop services queries), so the report can tell

* a rank that has not reached this collective yet, and what it is waiting for instead;
* a rank that entered a *different* collective at this position (the ranks' collectives
  are out of step: one skipped or added a call);
* a rank that does not answer at all: it is computing outside LeZero's communication,
  hung, or gone.

Queries and answers are tiny Python objects (pickled); arrays never take this path.
"""
import itertools
import time
import weakref

_QUERY, _REPLY = 31001, 31002
_GRACE_S = 1.0                    # how long a stalled rank waits for the others' answers
_trackers = weakref.WeakSet()
BUCKET_HINT = ("  (DataParallel gradient bucket: if the ranks have different numbers of "
               "batches, use DataParallel.join() or DistributedSampler(drop_last=True) so "
               "that every rank runs the same number of steps)")
_query_ids = itertools.count(1)


class Tracker:
    """This rank's progress on one communicator (and the side channel to ask the others)."""

    def __init__(self, name, rank, size, timeout, ctrl=None):
        self.name, self.rank, self.size, self.timeout = name, rank, size, timeout
        self.ctrl = ctrl                 # an mpi4py communicator, or None (one process)
        self.world_ranks = None          # world rank of each rank here (None: the world)
        self.entered = 0                 # collectives entered on this communicator
        self.last = None                 # "allreduce #3 (bucket 1 of 2)"
        self.last_op = None              # "allreduce"
        self.waiting = None              # (what, since) while blocked in a wait
        self._sends = []
        _trackers.add(self)

    def enter(self, op, detail=""):
        """Count one more collective ``op``; returns its number on this communicator
        (from 1)."""
        self.entered += 1
        self.last_op = op
        self.last = f"{op} #{self.entered}" + (f" ({detail})" if detail else "")
        return self.entered

    def state(self):
        waiting = None
        if self.waiting is not None:
            what, since = self.waiting
            waiting = (what, round(time.perf_counter() - since, 2))
        return {"rank": self.rank, "entered": self.entered, "last": self.last,
                "last_op": self.last_op, "waiting": waiting}

    def service(self):
        """Answer the stall queries other ranks sent us (non-blocking)."""
        if self.ctrl is None:
            return
        from lezero.parallel._mpi import import_mpi
        MPI = import_mpi()
        status = MPI.Status()
        while self.ctrl.Iprobe(source=MPI.ANY_SOURCE, tag=_QUERY, status=status):
            source = status.Get_source()
            qid = self.ctrl.recv(source=source, tag=_QUERY)
            self._sends.append(self.ctrl.isend((qid, self.state()), dest=source,
                                               tag=_REPLY))
        self._sends = [r for r in self._sends if not r.Test()]

    def ask_others(self, grace=_GRACE_S):
        """{rank: state or None (no answer within ``grace`` seconds)} for the other ranks."""
        answers = {r: None for r in range(self.size) if r != self.rank}
        if self.ctrl is None or not answers:
            return answers
        qid = next(_query_ids)
        for r in answers:
            self._sends.append(self.ctrl.isend(qid, dest=r, tag=_QUERY))
        from lezero.parallel._mpi import import_mpi
        MPI = import_mpi()
        status = MPI.Status()
        deadline = time.perf_counter() + grace
        while time.perf_counter() < deadline and any(v is None for v in answers.values()):
            service_all()
            while self.ctrl.Iprobe(source=MPI.ANY_SOURCE, tag=_REPLY, status=status):
                got_qid, state = self.ctrl.recv(source=status.Get_source(), tag=_REPLY)
                if got_qid == qid:
                    answers[state["rank"]] = state
            time.sleep(0.005)
        return answers


def service_all():
    """Answer pending queries on every communicator of this process."""
    for tracker in list(_trackers):
        tracker.service()


def describe_peer(rank, state, seq, op, grace=_GRACE_S):
    """One line on another rank's answer to a stall query; (text, arrived)."""
    if state is None:
        return (f"rank {rank} has not arrived: no answer within {grace:g} s (it is "
                f"computing outside LeZero's communication, hung, or gone)"), False
    doing = ""
    if state["waiting"] is not None:
        doing = f"; it is waiting for {state['waiting'][0]} ({state['waiting'][1]:g} s)"
    else:
        doing = "; it is not waiting in any communication (computing)"
    last = state["last"] or "nothing yet"
    if seq is None:
        return f"rank {rank}: last collective {last}{doing}", True
    if state["entered"] < seq:
        return f"rank {rank} has not arrived: its last collective is {last}{doing}", False
    if state["entered"] == seq and state["last_op"] != op:
        return (f"rank {rank} entered a different collective here, {last}: the ranks' "
                f"collectives are out of step (one rank skipped or added a call){doing}"), False
    return f"rank {rank} arrived (now at {last}){doing}", True


def report(request, waited):
    """The stall report for ``request`` after ``waited`` seconds (the message of the
    ``CollectiveTimeoutError`` that the wait raises)."""
    tracker = request.tracker
    seq, op, where = request.seq, request.op, request.label
    head = (f"[lezero.parallel] stall on communicator '{tracker.name}' (rank {tracker.rank} "
            f"of {tracker.size}): waited {waited:.1f} s (timeout {tracker.timeout:g} s) for "
            f"{where} to complete.")
    answers = tracker.ask_others()
    lines, missing = [head], []
    for rank, state in sorted(answers.items()):
        text, arrived = describe_peer(rank, state, seq, op)
        lines.append("  " + text)
        if not arrived:
            missing.append(rank)
    if seq is not None:
        lines.append(f"  ranks not arrived at {op} #{seq}: {missing if missing else 'none'}")
    if "bucket" in request.what and missing:
        lines.append(BUCKET_HINT)
    return "\n".join(lines)
