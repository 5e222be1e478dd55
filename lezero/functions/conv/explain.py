"""``conv_explain``'s engine: predict, measure and check every algorithm on one problem.

Each algorithm runs once against a float64 im2col reference (its error relative to the
largest reference value), is timed as autotuning times it, and the choice ``algo="auto"``
would make is reported with its reason.
"""
import numpy as np

from lezero import cuda
from lezero.core import get_config
from lezero.functions.conv.autotune import make_operands, measure, operands, warm_cache
from lezero.functions.conv.cost_model import by_model, predicted_seconds
from lezero.functions.conv.parallel import run_product
from lezero.functions.conv.registry import ALGORITHMS


class Explanation:
    """What ``conv_explain`` found: ``rows`` (one dict per algorithm), ``chosen``, ``reason``."""

    def __init__(self, prob, op, rows, chosen, reason):
        self.prob, self.op, self.rows, self.chosen, self.reason = prob, op, rows, chosen, reason

    def __getitem__(self, name):
        return next(r for r in self.rows if r["algo"] == name)

    def __str__(self):
        p = self.prob
        lines = [f"conv {self.op}: x {p.x_shape}, w {p.w_shape}, {p.geom.describe()}, "
                 f"{p.dtype}, {p.backend}; {p.flops() / 1e9:.3f} GFLOP direct",
                 f"{'algorithm':<14}{'predicted ms':>13}{'measured ms':>13}{'workspace MB':>14}"
                 f"{'rel. error':>12}  note"]
        for r in self.rows:
            if r["unsupported"]:
                lines.append(f"{r['algo']:<14}{'-':>13}{'-':>13}{'-':>14}{'-':>12}  "
                             f"{r['unsupported']}")
                continue
            meas = "-" if r["measured_ms"] is None else f"{r['measured_ms']:.3f}"
            err = "-" if r["rel_error"] is None else f"{r['rel_error']:.1e}"
            mark = "  <- chosen" if r["algo"] == self.chosen else ""
            lines.append(f"{r['algo']:<14}{r['predicted_ms']:>13.3f}{meas:>13}"
                         f"{r['workspace_bytes'] / 2 ** 20:>14.2f}{err:>12}{mark}")
        lines.append(f"chosen: {self.chosen} ({self.reason})")
        return "\n".join(lines)

    __repr__ = __str__


def explain(prob, op="forward", measure_time=True, repeat=3, after=None):
    """Predict, measure and check every algorithm on ``prob``; see ``F.conv_explain``."""
    after = after if op != "forward" else None
    ops = make_operands(prob)
    inputs = operands(ops, op)
    ref_inputs = [cuda.as_numpy(a).astype(np.float64) for a in inputs]
    ref_prob = type(prob)(prob.geom, prob.batch, prob.in_channels, prob.out_channels,
                          "float64", "numpy")
    reference = ALGORITHMS["im2col"].run(op, *ref_inputs, ref_prob, {})
    scale = float(np.abs(reference).max()) or 1.0
    rows = []
    for name, algo in ALGORITHMS.items():
        why = algo.unsupported(prob)
        row = {"algo": name, "unsupported": why, "predicted_ms": None, "measured_ms": None,
               "workspace_bytes": None, "max_abs_error": None, "rel_error": None}
        if why is None:
            reuse = name == after
            cache = warm_cache(algo, prob, op, ops) if reuse else {}
            out = cuda.as_numpy(run_product(algo, op, *inputs, prob, cache)).astype(np.float64)
            err = float(np.abs(out - reference).max())
            row.update(predicted_ms=predicted_seconds(algo, prob, op, reuse) * 1e3,
                       workspace_bytes=algo.workspace_bytes(prob, op),
                       max_abs_error=err, rel_error=err / scale)
            if measure_time:
                row["measured_ms"] = measure(algo, prob, op, inputs, repeat, cache) * 1e3
        rows.append(row)
    ok = [r for r in rows if r["unsupported"] is None]
    if get_config().conv_autotune and measure_time:
        chosen = min(ok, key=lambda r: r["measured_ms"])["algo"]
        reason = "fastest measured; Config.conv_autotune is on"
    else:
        chosen = by_model(prob, op, prefer=after).name
        reason = "lowest predicted time; the cost model decides while Config.conv_autotune is off"
    if after:
        reason += f"; {after} is timed reusing what its forward pass cached"
    if len(ok) == 1:
        reason = "the only algorithm that handles this geometry"
    return Explanation(prob, op, rows, chosen, reason)
