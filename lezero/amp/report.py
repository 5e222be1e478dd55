"""``precision_report``: what autocast decided for each operator, and where float16 hurts.

    rep = amp.precision_report(lambda: F.cross_entropy(model(x), t), model=model,
                               scale=scaler)
    print(rep)          # per operator type: treatment, rule, dtypes; per parameter:
                        # the fraction of gradient elements float16 loses at this scale

Per operator type: the treatment the cast policy chose, the rule that chose it (table,
user override, class attribute, default), the dtypes its inputs had after casting and
how many calls.  Per parameter: of its float32 gradient (a second, float32 run of the same
loss), the fraction of elements that round to zero in float16 once multiplied by the loss
scale (*underflow*), that land among float16's subnormals (*subnormal*: fewer than 11 bits
kept) and that overflow to inf (*overflow*; GradScaler then skips the step).
"""
import numpy as np

from lezero import cuda
from lezero.amp.autocast import _active, autocast
from lezero.amp.dtypes import is_floating
from lezero.core import Variable, grad
from lezero.utils.checks import check_callable, check_number, describe

__all__ = ["precision_report", "PrecisionReport"]

_TINY = float(np.finfo(np.float16).tiny)          # smallest normal float16, 2**-14


class PrecisionReport:
    """``ops``: {Function class: {treatment, rule, dtypes, calls}};
    ``params``: {name: {numel, underflow, subnormal, overflow}}; ``scale``; ``dtype``."""

    def __init__(self, ops, params, scale, dtype):
        self.ops, self.params, self.scale, self.dtype = ops, params, scale, dtype

    def __str__(self):
        lines = [f"autocast({self.dtype}): compute dtype per operator type "
                 "(on NumPy, low-precision arithmetic runs in float32, stored rounded)",
                 f"{'operator':<22}{'calls':>6}  {'treatment':<16}{'rule':<28}input dtypes"]
        for name, r in sorted(self.ops.items(), key=lambda kv: (kv[1]["treatment"], kv[0])):
            dtypes = ", ".join(sorted(r["dtypes"])) or "-"
            lines.append(f"{name:<22}{r['calls']:>6}  {r['treatment']:<16}{r['rule']:<28}"
                         f"{dtypes}")
        if self.params:
            lines += ["", f"gradients in float16 at loss scale {self.scale:g}:",
                      f"{'parameter':<32}{'elements':>10}{'underflow':>11}{'subnormal':>11}"
                      f"{'overflow':>10}"]
            for name, r in self.params.items():
                lines.append(f"{name:<32}{r['numel']:>10}{r['underflow']:>11.2%}"
                             f"{r['subnormal']:>11.2%}{r['overflow']:>10.2%}")
        return "\n".join(lines)

    __repr__ = __str__


def _named(model, params):
    if model is not None:
        return list(model.named_parameters())
    if params is None:
        return []
    if isinstance(params, dict):
        return list(params.items())
    return [(p.name or f"param {i}", p) for i, p in enumerate(params)]


def _fractions(g, scale):
    """Underflow / subnormal / overflow fractions of ``g * scale`` in float16."""
    g = np.asarray(cuda.as_numpy(g), dtype=np.float64) * scale
    n = max(g.size, 1)
    with np.errstate(over="ignore"):
        h = g.astype(np.float16)
    nonzero = g != 0
    return {"numel": int(g.size),
            "underflow": float(((h == 0) & nonzero).sum()) / n,
            "subnormal": float(((np.abs(h) < _TINY) & (h != 0)).sum()) / n,
            "overflow": float((np.isinf(h) & np.isfinite(g)).sum()) / n}


def precision_report(fn, *args, model=None, params=None, scale=2.0 ** 16, dtype="float16",
                     **kwargs):
    """Run ``loss = fn(*args, **kwargs)`` under ``autocast(dtype)`` recording every cast
    decision; with ``model`` or ``params`` also measure float16 gradient underflow at
    ``scale`` (a number or a GradScaler) on a float32 run of the same loss."""
    check_callable("precision_report", "fn", fn)
    if hasattr(scale, "get_scale"):
        scale = scale.get_scale()
    scale = check_number("precision_report", "scale", scale, low=0, low_open=True)
    ops = {}

    def record(function, treatment, rule, inputs):
        r = ops.setdefault(type(function).__name__, {"treatment": treatment, "rule": rule,
                                                     "dtypes": set(), "calls": 0})
        r["calls"] += 1
        r["dtypes"].update(x.dtype.name for x in inputs if is_floating(x.dtype))

    with autocast(dtype) as region:
        _active().recorder = record
        loss = fn(*args, **kwargs)
    if not isinstance(loss, Variable):
        raise TypeError(f"precision_report: fn must return the loss (a Variable), got "
                        f"{describe(loss)}")
    named = _named(model, params)
    report_params = {}
    if named:
        ref = fn(*args, **kwargs)                  # the float32 run
        gs = grad(ref, [p for _, p in named], allow_unused=True)
        for (name, _), g in zip(named, gs):
            if g is not None:
                report_params[name] = _fractions(g.data, scale)
    return PrecisionReport(ops, report_params, scale, region.dtype.name)
