"""Pipeline schedules as data: a list of ``Op(rank, step, action, micro_batch, chunk)``.

``action`` is "F" (forward of ``micro_batch`` through a stage) or "B" (its backward).  A
rank may hold several model *chunks* (interleaved 1F1B): chunk ``c`` on rank ``r`` is the
virtual stage ``v = c * ranks + r``, so virtual stages 0, 1, ... run round-robin over
the ranks.  Without interleaving ``chunk`` is 0 and the stage is the rank.  ``step`` is
the op's slot on a clock where every op takes one unit: it orders the ops of a rank (the
executor runs them in that order) and places them in the drawn timeline.

The communication is implied by the data: a forward of virtual stage ``v > 0`` receives
its input activation from the owner of ``v - 1``; a backward of ``v < last`` receives its
output gradient from the owner of ``v + 1``; the backward of the last stage starts from
the loss.  ``simulate.py`` simulates a schedule and checks it for deadlock, ``draw.py``
draws it, ``engine.py`` runs exactly these ops over MPI send/recv.

Builders (each returns a ``Schedule`` whose steps come from the unit-time simulation):

* ``gpipe(ranks, micro_batches)``: fill-drain -- every forward, then every backward;
  each stage holds all ``m`` activations at its peak;
* ``one_f_one_b(ranks, micro_batches)``: PipeDream-Flush / Megatron's default -- rank r
  runs ``ranks - r - 1`` warm-up forwards, then alternates one forward and one backward,
  then drains; the same bubble as GPipe with at most ``ranks - r`` activations held;
* ``interleaved_one_f_one_b(ranks, micro_batches, chunks)``: Megatron's interleaved
  schedule, ``chunks`` model chunks per rank; the bubble shrinks by ``chunks``.
"""
from typing import NamedTuple

from lezero.utils.checks import check_choice, check_int

ACTIONS = ("F", "B")
NAMES = ("gpipe", "1f1b", "interleaved")


class Op(NamedTuple):
    """One action of a pipeline schedule."""
    rank: int
    step: int
    action: str
    micro_batch: int
    chunk: int = 0

    def label(self, chunks=1):
        """"F3" (or "F3b" for chunk 1 of an interleaved schedule)."""
        suffix = chr(ord("a") + self.chunk) if chunks > 1 else ""
        return f"{self.action}{self.micro_batch}{suffix}"


class Schedule:
    """A validated pipeline schedule (see the module docstring).

    ``Schedule(ops, ranks, micro_batches, chunks=1, name="custom")``: ``ops`` is any
    iterable of ``Op`` or plain ``(rank, step, action, micro_batch[, chunk])`` tuples.
    Construction checks the schedule (``simulate.check_schedule``): a schedule with a
    missing or repeated op, a backward before its forward, or one that deadlocks is a
    ``ScheduleError`` that says why.  ``check=False`` skips that (to inspect a bad one).
    """

    def __init__(self, ops, ranks, micro_batches, chunks=1, name="custom", check=True):
        where = "Schedule"
        self.ranks = check_int(where, "ranks", ranks, 1)
        self.micro_batches = check_int(where, "micro_batches", micro_batches, 1)
        self.chunks = check_int(where, "chunks", chunks, 1)
        self.name = str(name)
        self.ops = sorted((_as_op(o) for o in ops), key=lambda o: (o.step, o.rank))
        if check:
            from lezero.parallel.pipeline.simulate import check_schedule
            check_schedule(self)

    @property
    def stages(self):
        """The number of (virtual) stages: ranks x chunks."""
        return self.ranks * self.chunks

    def stage_of(self, op):
        return op.chunk * self.ranks + op.rank

    def ops_of(self, rank):
        """This rank's ops in the order it runs them."""
        return [o for o in self.ops if o.rank == rank]

    @property
    def steps(self):
        return 1 + max(o.step for o in self.ops) if self.ops else 0

    def simulate(self, **costs):
        """``simulate.simulate(self, **costs)``."""
        from lezero.parallel.pipeline.simulate import simulate
        return simulate(self, **costs)

    def text(self, **kwargs):
        """The timeline as text, one column per step (``draw.timeline_text``)."""
        from lezero.parallel.pipeline.draw import timeline_text
        return timeline_text(self.simulate(forward_time=1.0, backward_time=1.0), **kwargs)

    def plot(self, path=None, **kwargs):
        """The simulated timeline as a matplotlib figure (``draw.plot_timeline``)."""
        from lezero.parallel.pipeline.draw import plot_timeline
        return plot_timeline(self.simulate(), path=path, **kwargs)

    def __iter__(self):
        return iter(self.ops)

    def __len__(self):
        return len(self.ops)

    def __repr__(self):
        return (f"<Schedule {self.name}: {self.ranks} ranks x {self.chunks} chunks, "
                f"{self.micro_batches} micro-batches, {len(self.ops)} ops, "
                f"{self.steps} steps>")


def _as_op(o):
    if isinstance(o, Op):
        return o
    if not isinstance(o, (tuple, list)) or len(o) not in (4, 5):
        raise TypeError(f"Schedule: each op must be an Op or a (rank, step, action, "
                        f"micro_batch[, chunk]) tuple, got {o!r}")
    return Op(*o)


def from_orders(name, orders, micro_batches, chunks=1):
    """A Schedule from each rank's ordered ``(action, micro_batch, chunk)`` list, its steps
    taken from the unit-time simulation (every op one unit, no communication delay)."""
    from lezero.parallel.pipeline.simulate import unit_steps
    ranks = len(orders)
    provisional = [Op(r, i, a, mb, c) for r, order in enumerate(orders)
                   for i, (a, mb, c) in enumerate(order)]
    steps = unit_steps(provisional, ranks, micro_batches, chunks, name)
    ops = [o._replace(step=steps[o]) for o in provisional]
    return Schedule(ops, ranks, micro_batches, chunks, name)


def gpipe(ranks, micro_batches):
    """Fill-drain: every forward, then every backward (in micro-batch order)."""
    p, m = _sizes("gpipe", ranks, micro_batches)
    orders = [[("F", i, 0) for i in range(m)] + [("B", i, 0) for i in range(m)]
              for _ in range(p)]
    return from_orders("gpipe", orders, m)


def one_f_one_b(ranks, micro_batches):
    """1F1B (PipeDream-Flush): warm-up forwards, alternate, drain."""
    p, m = _sizes("1f1b", ranks, micro_batches)
    orders = []
    for r in range(p):
        warm = min(p - r - 1, m)
        order = [("F", i, 0) for i in range(warm)]
        for i in range(m - warm):
            order += [("F", warm + i, 0), ("B", i, 0)]
        order += [("B", i, 0) for i in range(m - warm, m)]
        orders.append(order)
    return from_orders("1f1b", orders, m)


def interleaved_one_f_one_b(ranks, micro_batches, chunks=2):
    """Megatron's interleaved 1F1B with ``chunks`` model chunks per rank
    (``micro_batches`` must be a multiple of ``ranks``)."""
    where = "interleaved_one_f_one_b"
    p, m = _sizes(where, ranks, micro_batches)
    v = check_int(where, "chunks", chunks, 1)
    if m % p:
        raise ValueError(f"{where}: micro_batches ({m}) must be a multiple of ranks ({p}), "
                         "as in Megatron's interleaved schedule")
    total = m * v

    def op(k, forward):
        c = (k % (p * v)) // p
        return ("F" if forward else "B", (k // (p * v)) * p + k % p,
                c if forward else v - 1 - c)

    orders = []
    for r in range(p):
        warm = min((p - r - 1) * 2 + (v - 1) * p, total)
        order = [op(k, True) for k in range(warm)]
        for i in range(total - warm):
            order += [op(warm + i, True), op(i, False)]
        order += [op(k, False) for k in range(total - warm, total)]
        orders.append(order)
    return from_orders(f"interleaved x{v}" if v > 1 else "interleaved", orders, m, v)


def make_schedule(schedule, ranks, micro_batches, chunks=1):
    """A Schedule from a name ("gpipe", "1f1b", "interleaved") or a Schedule (checked to
    fit ``ranks``, ``micro_batches`` and ``chunks``)."""
    if isinstance(schedule, Schedule):
        got = (schedule.ranks, schedule.micro_batches, schedule.chunks)
        if got != (ranks, micro_batches, chunks):
            raise ValueError(f"Pipeline: the schedule is for (ranks, micro_batches, chunks) "
                             f"= {got}, the pipeline has {(ranks, micro_batches, chunks)}")
        return schedule
    if not isinstance(schedule, str):
        raise TypeError(f"Pipeline: schedule must be a name {NAMES} or a Schedule, got "
                        f"{type(schedule).__name__}")
    name = check_choice("Pipeline", "schedule", schedule.lower(), NAMES)
    if name != "interleaved" and chunks != 1:
        raise ValueError(f"Pipeline: chunks={chunks} needs schedule='interleaved' "
                         f"(schedule {name!r} runs one chunk per rank)")
    if name == "gpipe":
        return gpipe(ranks, micro_batches)
    if name == "1f1b":
        return one_f_one_b(ranks, micro_batches)
    return interleaved_one_f_one_b(ranks, micro_batches, chunks)


def bubble_theory(name, ranks, micro_batches, chunks=1):
    """The idle fraction of a schedule in theory: ``(p-1) / (v m + p - 1)`` (GPipe and
    1F1B: v = 1), for uniform stages and free communication."""
    p, m, v = ranks, micro_batches, chunks if name.startswith("interleaved") else 1
    return (p - 1) / (v * m + p - 1)


def _sizes(where, ranks, micro_batches):
    return check_int(where, "ranks", ranks, 1), check_int(where, "micro_batches",
                                                          micro_batches, 1)
