"""Communication accounting: which layer ran which collectives, how often, how many bytes.

    with parallel.CommAccounting(model) as acc:     # hooks name every submodule
        loss = model.loss(idx, targets); loss.backward()
    print(acc.table())                              # per layer: op, count, bytes per step

The differentiable collectives (``collectives.py``) and the pipeline's sends call
``record`` with the *scope* that was current when their Function was created: the
qualified name of the innermost module whose forward was running (``CommAccounting``
pushes it from forward pre-hooks), or a name a function gives itself with ``scope``
(``vocab_parallel_cross_entropy``).  A backward collective is the partner Function made
during backward; it inherits its forward partner's scope and is recorded as "backward".
Nothing is recorded, and nothing costs more than one list check, while no accounting is
active.

Time: each collective's wall time on this rank (waiting for the slowest rank included).
Bytes: ``payload`` is the size of the array handed to the collective on this rank;
``wire`` is what one rank sends under the bandwidth-optimal (ring) algorithms:
all-reduce ``2 (p-1)/p n``, all-gather ``(p-1) n_in``, reduce-scatter ``(p-1)/p n``,
broadcast ``n``, send ``n`` -- the figure the alpha-beta cost model multiplies by beta.
"""
import contextlib
from collections import OrderedDict

_active = []           # CommAccounting objects recording now
_scopes = []           # the stack of scope names (innermost last)
OUTSIDE = "(no layer)"


def current_scope():
    """The scope a collective created now is attributed to."""
    return _scopes[-1] if _scopes else OUTSIDE


@contextlib.contextmanager
def scope(name):
    """Attribute collectives created inside to ``name`` (a function's own scope)."""
    _scopes.append(name)
    try:
        yield
    finally:
        _scopes.pop()


def wire_bytes(op, payload, size):
    """Bytes one rank sends for ``op`` on ``payload`` bytes over ``size`` ranks (ring)."""
    if size <= 1 and op != "send":
        return 0
    if op == "allreduce":
        return 2 * (size - 1) * payload // size
    if op == "allgather":
        return (size - 1) * payload
    if op == "reduce_scatter":
        return (size - 1) * payload // size
    return payload                   # bcast, send


def active():
    """True while some ``CommAccounting`` records."""
    return bool(_active)


def record(scope_name, phase, op, comm, payload, seconds=0.0):
    """Count one ``op`` of ``payload`` bytes on ``comm`` in ``phase`` that took
    ``seconds`` (waiting for the slowest rank included)."""
    if not _active:
        return
    size = comm.size if comm is not None else 1
    wire = wire_bytes(op, int(payload), size)
    for acc in _active:
        acc._add(scope_name, phase, op, getattr(comm, "name", "?"), size, int(payload), wire,
                 seconds)


class CommAccounting:
    """Record the collectives run inside ``with``; ``steps`` divides the totals.

    ``model``: a Module whose submodules are named (forward pre-hooks push the qualified
    name, forward hooks pop it); several modules may be given as a list.  Without one,
    collectives are attributed to explicit ``scope`` names only.
    """

    def __init__(self, model=None, steps=1):
        from lezero.utils.checks import check_int
        self.steps = check_int("CommAccounting", "steps", steps, 1)
        models = [] if model is None else (list(model) if isinstance(model, (list, tuple))
                                           else [model])
        self._models = models
        self._handles = []
        self.rows = OrderedDict()   # (scope, phase, op, comm) -> [count, payload, wire, s]

    def _add(self, scope_name, phase, op, comm_name, size, payload, wire, seconds):
        key = (scope_name, phase, op, f"{comm_name} ({size})")
        row = self.rows.setdefault(key, [0, 0, 0, 0.0])
        row[0] += 1
        row[1] += payload
        row[2] += wire
        row[3] += seconds

    def __enter__(self):
        for model in self._models:
            for name, module in model.named_modules():
                label = name or type(module).__name__
                self._handles.append(module.register_forward_pre_hook(_push(label)))
                self._handles.append(module.register_forward_hook(_pop))
        self._depth = len(_scopes)
        _active.append(self)
        return self

    def __exit__(self, *exc):
        _active.remove(self)
        for h in self._handles:
            h.remove()
        self._handles = []
        del _scopes[self._depth:]          # a forward that raised left its names
        return False

    def per_layer(self):
        """A list of dicts: layer, phase, op, comm, and per step: count, payload and wire
        bytes, seconds."""
        out = []
        for (scope_name, phase, op, comm), (count, payload, wire, sec) in self.rows.items():
            out.append({"layer": scope_name, "phase": phase, "op": op, "comm": comm,
                        "count": count / self.steps, "payload_bytes": payload / self.steps,
                        "wire_bytes": wire / self.steps, "seconds": sec / self.steps})
        return out

    def totals(self):
        """{"count", "payload_bytes", "wire_bytes", "seconds"} per step, over every layer."""
        rows = self.per_layer()
        return {k: sum(r[k] for r in rows)
                for k in ("count", "payload_bytes", "wire_bytes", "seconds")}

    def table(self):
        """A text table, one line per (layer, phase, op)."""
        from lezero.parallel.wire import nbytes_text
        lines = [f"{'layer':<34}{'phase':<9}{'op':<10}{'comm':<14}{'count':>6}"
                 f"{'payload':>11}{'sent':>11}{'ms':>8}"]
        for r in self.per_layer():
            lines.append(f"{r['layer'][:33]:<34}{r['phase']:<9}{r['op'][:9]:<10}"
                         f"{r['comm'][:13]:<14}{r['count']:>6g}"
                         f"{nbytes_text(int(r['payload_bytes'])):>11}"
                         f"{nbytes_text(int(r['wire_bytes'])):>11}{r['seconds'] * 1e3:>8.2f}")
        t = self.totals()
        lines.append(f"{'total per step':<67}{t['count']:>6g}"
                     f"{nbytes_text(int(t['payload_bytes'])):>11}"
                     f"{nbytes_text(int(t['wire_bytes'])):>11}{t['seconds'] * 1e3:>8.2f}")
        return "\n".join(lines)


def _push(label):
    def hook(module, args):
        _scopes.append(label)
    return hook


def _pop(module, args, output):
    if _scopes:
        _scopes.pop()
