"""Choosing a convolution algorithm: by name, by the cost model, or by measurement.

``algo="auto"`` asks the cost model (each algorithm's ``predict``) unless
``lz.Config.conv_autotune`` is on; then the candidates are timed once per shape bucket and
the winner is remembered in a JSON file (see ``autotune``).
"""
from lezero.core import get_config, register_setting
from lezero.functions.conv.direct import Direct
from lezero.functions.conv.fft import FFT
from lezero.functions.conv.im2col import Im2col
from lezero.functions.conv.winograd import Winograd

register_setting("conv_autotune", False)

ALGORITHMS = {a.name: a for a in (Im2col(), Winograd(2), Winograd(4), FFT(), Direct())}
# "winograd" lets the cost model (or autotuning) pick the tile size.
GROUPS = {"winograd": ("winograd_4x4", "winograd_2x2")}
NAMES = ("auto",) + tuple(ALGORITHMS) + tuple(GROUPS)


def candidates(prob, names=None):
    """The algorithms (objects) that can run ``prob``, in registry order."""
    names = names or tuple(ALGORITHMS)
    return [ALGORITHMS[n] for n in names if ALGORITHMS[n].unsupported(prob) is None]


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


_model_choice = {}


def by_model(prob, op, names=None, prefer=None):
    """The candidate with the lowest predicted time.  ``prefer`` names the algorithm that
    ran the forward pass: its backward products reuse what it cached (Winograd keeps the
    transformed input), and the prediction counts that.  Remembered per problem, since a
    training loop asks the same question every step."""
    key = (prob, op, names, prefer)
    algo = _model_choice.get(key)
    if algo is None:
        algo = min(candidates(prob, names),
                   key=lambda a: a.predict(prob, op, reuse=a.name == prefer))
        if len(_model_choice) > 4096:
            _model_choice.clear()
        _model_choice[key] = algo
    return algo


def predicted_seconds(algo, prob, op, reuse=False):
    """The model's time for the configured threads (batch-split products divide)."""
    from lezero.functions.conv.parallel import parts_for
    return algo.predict(prob, op, reuse) / parts_for(prob)


def choose(prob, op, algo="auto", prefer=None):
    """The algorithm object to run ``op`` ("forward", "grad_input", "grad_weight");
    ``prefer``: the forward pass's algorithm, when choosing for its backward."""
    if algo in ALGORITHMS:
        return ALGORITHMS[algo]
    names = GROUPS.get(algo)
    if get_config().conv_autotune:
        from lezero.functions.conv import autotune
        return ALGORITHMS[autotune.tuned(prob, op, names, prefer)]
    return by_model(prob, op, names, prefer)
