"""Choosing a convolution algorithm: by name, by the cost model, or by measurement.

``algo="auto"`` asks the cost model (each algorithm's ``predict``) unless
``lz.Config.conv_autotune`` is on; then the candidates are timed once per shape bucket and
the winner is remembered in a JSON file (see ``autotune``).  The top of the chain
registry <- cost_model <- autotune <- select.
"""
from lezero.core import get_config
from lezero.functions.conv import autotune
from lezero.functions.conv.cost_model import by_model, predicted_seconds  # noqa: F401
from lezero.functions.conv.registry import ALGORITHMS, GROUPS, NAMES, candidates  # noqa: F401


def check_algo(op, algo, prob):
    """Raise unless ``algo`` names an algorithm that can run ``prob`` (wrapper-time check)."""
    if not isinstance(algo, str):
        raise TypeError(f"{op}: algo must be a str, got {type(algo).__name__}")
    if algo not in NAMES:
        raise ValueError(f"{op}: algo must be one of {', '.join(map(repr, NAMES))}; "
                         f"got {algo!r}")
    if algo == "auto":
        return
    names = GROUPS.get(algo, (algo,))
    reasons = [ALGORITHMS[n].unsupported(prob) for n in names]
    if all(r is not None for r in reasons):
        raise ValueError(f"{op}: algo={algo!r} {reasons[0]}; this call has "
                         f"{prob.geom.describe()} with {prob.in_channels} input channels")


def choose(prob, op, algo="auto", prefer=None):
    """The algorithm object to run ``op`` ("forward", "grad_input", "grad_weight");
    ``prefer``: the forward pass's algorithm, when choosing for its backward."""
    if algo in ALGORITHMS:
        return ALGORITHMS[algo]
    names = GROUPS.get(algo)
    if get_config().conv_autotune:
        return ALGORITHMS[autotune.tuned(prob, op, names, prefer)]
    return by_model(prob, op, names, prefer)
