"""Simulate a pipeline schedule, and check it before it runs.

The model is the executor's (``engine.py``): each rank runs its ops in step order, one at
a time; sends never block (they are non-blocking, waited at the end of the step); an op
that needs a message -- a forward its input activation from the previous stage, a
backward its output gradient from the next -- waits until the op that sends it has
finished on the other rank, plus the message's transfer time.  A schedule *deadlocks*
when, with ops left, no rank's next op can start: each waits for a message whose sender
is itself stuck behind an op that waits.  ``check_schedule`` finds that (and every
structural mistake) before anything runs, and says which rank waits for what.

``simulate`` gives the timeline for given costs: each op's start and end, the makespan,
the bubble (idle fraction), the peak number of activations each rank holds, and the
messages and bytes each rank sends.
"""
from collections import Counter

from lezero.utils.checks import check_number


class ScheduleError(ValueError):
    """A pipeline schedule that cannot run: the message says why."""


def _key(action, micro_batch, stage):
    return (action, micro_batch, stage)


def dependency(op, ranks, stages):
    """``(key, rank)`` of the op whose result ``op`` receives from another stage, or None:
    a forward needs F(mb) of the previous stage; a backward the B(mb) of the next stage,
    or, on the last stage, its own forward (the loss)."""
    v = op.chunk * ranks + op.rank
    if op.action == "F":
        return None if v == 0 else (_key("F", op.micro_batch, v - 1), (v - 1) % ranks)
    if v == stages - 1:
        return _key("F", op.micro_batch, v), op.rank
    return _key("B", op.micro_batch, v + 1), (v + 1) % ranks


def _describe(op, ranks, stages, chunks):
    v = op.chunk * ranks + op.rank
    what = f"{op.label(chunks)} (stage {v})"
    dep = dependency(op, ranks, stages)
    if dep is None:
        return what, None
    (action, mb, stage), owner = dep
    if action == "F" and op.action == "B":
        return what, f"its own forward F{mb} of stage {stage}"
    kind = "activation" if op.action == "F" else "gradient"
    return what, (f"the {kind} of micro-batch {mb} from rank {owner} (its {action}{mb} of "
                  f"stage {stage})")


def _structure(schedule):
    """Raise ScheduleError for ops out of range, missing or repeated, or two on a slot."""
    p, m, v, name = schedule.ranks, schedule.micro_batches, schedule.chunks, schedule.name
    for o in schedule.ops:
        if o.action not in ("F", "B"):
            raise ScheduleError(f"schedule {name!r}: unknown action {o.action!r} in {o} "
                                "(actions are 'F' and 'B')")
        for field, value, bound in (("rank", o.rank, p), ("micro_batch", o.micro_batch, m),
                                    ("chunk", o.chunk, v)):
            if not isinstance(value, int) or not 0 <= value < bound:
                raise ScheduleError(f"schedule {name!r}: {field} {value!r} of {o} is out of "
                                    f"range [0, {bound})")
    counts = Counter(_key(o.action, o.micro_batch, schedule.stage_of(o)) for o in schedule.ops)
    for stage in range(schedule.stages):
        for mb in range(m):
            for action in ("F", "B"):
                n = counts.get(_key(action, mb, stage), 0)
                if n != 1:
                    state = "missing" if n == 0 else f"repeated {n} times"
                    raise ScheduleError(f"schedule {name!r}: {action}{mb} of stage {stage} "
                                        f"(rank {stage % p}) is {state}")
    slots = Counter((o.rank, o.step) for o in schedule.ops)
    for (rank, step), n in slots.items():
        if n > 1:
            raise ScheduleError(f"schedule {name!r}: rank {rank} has {n} ops at step {step} "
                                "(a rank runs one op at a time)")


def _backward_after_forward(schedule):
    for rank in range(schedule.ranks):
        seen = set()
        for o in schedule.ops_of(rank):
            stage = schedule.stage_of(o)
            if o.action == "F":
                seen.add((o.micro_batch, stage))
            elif (o.micro_batch, stage) not in seen:
                raise ScheduleError(f"schedule {schedule.name!r}: rank {rank} runs "
                                    f"B{o.micro_batch} of stage {stage} at step {o.step} "
                                    "before its forward (the backward needs the forward's "
                                    "activations)")


def run(schedule, duration, transfer):
    """{op: (start, end)}: ``duration(op)`` seconds per op, ``transfer(op)`` seconds for
    the message it receives.  Raises ScheduleError on deadlock."""
    p, stages = schedule.ranks, schedule.stages
    queues = [schedule.ops_of(r) for r in range(p)]
    heads, clock, ended, times = [0] * p, [0.0] * p, {}, {}
    left = len(schedule.ops)
    while left:
        progressed = False
        for r in range(p):
            while heads[r] < len(queues[r]):
                o = queues[r][heads[r]]
                dep = dependency(o, p, stages)
                ready = 0.0
                if dep is not None:
                    if dep[0] not in ended:
                        break
                    ready = ended[dep[0]] + (transfer(o) if dep[1] != r else 0.0)
                start = max(clock[r], ready)
                clock[r] = start + duration(o)
                times[o] = (start, clock[r])
                ended[_key(o.action, o.micro_batch, schedule.stage_of(o))] = clock[r]
                heads[r] += 1
                left -= 1
                progressed = True
        if left and not progressed:
            raise ScheduleError(_deadlock_message(schedule, queues, heads))
    return times


def _deadlock_message(schedule, queues, heads):
    lines = [f"schedule {schedule.name!r} deadlocks: with ops left, no rank can go on"]
    waits = {}
    for r, q in enumerate(queues):
        if heads[r] >= len(q):
            lines.append(f"  rank {r} has finished its ops")
            continue
        o = q[heads[r]]
        what, needs = _describe(o, schedule.ranks, schedule.stages, schedule.chunks)
        waits[r] = dependency(o, schedule.ranks, schedule.stages)[1]
        lines.append(f"  rank {r} waits at step {o.step} to run {what}: it needs {needs}, "
                     "which has not run")
    cycle = _cycle(waits)
    if cycle:
        lines.append("  waiting cycle: " + " -> ".join(f"rank {r}" for r in cycle))
    return "\n".join(lines)


def _cycle(waits):
    for start in waits:
        path, r = [], start
        while r in waits and r not in path:
            path.append(r)
            r = waits[r]
        if r in path:
            return path[path.index(r):] + [r]
    return None


def check_schedule(schedule):
    """Raise ``ScheduleError`` unless ``schedule`` can run: every op present once, in
    range, one per slot, backwards after their forwards, and no deadlock."""
    _structure(schedule)
    _backward_after_forward(schedule)
    run(schedule, lambda o: 1.0, lambda o: 0.0)
    return schedule


def unit_steps(ops, ranks, micro_batches, chunks, name):
    """{op: step} from the unit-time simulation of per-rank ordered ``ops``."""
    from lezero.parallel.pipeline.schedule import Schedule
    provisional = Schedule(ops, ranks, micro_batches, chunks, name, check=False)
    _structure(provisional)
    _backward_after_forward(provisional)
    times = run(provisional, lambda o: 1.0, lambda o: 0.0)
    return {o: int(round(times[o][0])) for o in ops}


class SimResult:
    """A timeline: ``times`` {op: (start, end)} and what follows from it."""

    def __init__(self, schedule, times, activation_bytes=0, measured=False):
        self.schedule, self.times, self.measured = schedule, times, measured
        t0 = min(s for s, _ in times.values())
        self.times = {o: (s - t0, e - t0) for o, (s, e) in times.items()}
        self.makespan = max(e for _, e in self.times.values())
        p = schedule.ranks
        self.busy = [sum(e - s for o, (s, e) in self.times.items() if o.rank == r)
                     for r in range(p)]
        self.bubble = 1.0 - sum(self.busy) / (p * self.makespan) if self.makespan else 0.0
        self.peak_activations = [_peak(schedule.ops_of(r)) for r in range(p)]
        self.messages, self.bytes_sent = _traffic(schedule, activation_bytes)

    def summary(self):
        s = self.schedule
        kind = "measured" if self.measured else "simulated"
        from lezero.parallel.pipeline.schedule import bubble_theory
        theory = bubble_theory(s.name, s.ranks, s.micro_batches, s.chunks)
        return (f"{s.name}: {s.ranks} ranks, {s.micro_batches} micro-batches"
                + (f", {s.chunks} chunks" if s.chunks > 1 else "")
                + f" -- {kind} bubble {self.bubble:.1%} (theory {theory:.1%}), peak "
                f"activations per rank {self.peak_activations}, messages sent per rank "
                f"{self.messages}")

    def __repr__(self):
        return f"<SimResult {self.summary()}>"


def _peak(ops):
    held = peak = 0
    for o in ops:
        held += 1 if o.action == "F" else -1
        peak = max(peak, held)
    return peak


def _traffic(schedule, nbytes):
    """Messages and bytes each rank sends (one per stage boundary crossed, each way)."""
    p, stages = schedule.ranks, schedule.stages
    messages = [0] * p
    for o in schedule.ops:
        v = schedule.stage_of(o)
        target = v + 1 if o.action == "F" else v - 1
        if 0 <= target < stages and target % p != o.rank:
            messages[o.rank] += 1
    return messages, [n * nbytes for n in messages]


def simulate(schedule, forward_time=1.0, backward_time=2.0, transfer_time=0.0,
             activation_bytes=0):
    """The timeline of ``schedule`` with every forward taking ``forward_time``, every
    backward ``backward_time`` and every message ``transfer_time`` (seconds or any
    unit); ``activation_bytes`` per message for the traffic totals."""
    f = check_number("simulate", "forward_time", forward_time, 0)
    b = check_number("simulate", "backward_time", backward_time, 0)
    c = check_number("simulate", "transfer_time", transfer_time, 0)
    times = run(schedule, lambda o: f if o.action == "F" else b, lambda o: c)
    return SimResult(schedule, times, activation_bytes)
