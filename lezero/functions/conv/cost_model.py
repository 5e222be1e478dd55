"""The cost model's choice: the candidate with the lowest predicted time.

Each algorithm predicts its single-thread time (``Algorithm.predict``, built on
``machine``); products split over the batch (``parallel``) divide by the number of parts.
"""
from lezero.functions.conv.parallel import parts_for
from lezero.functions.conv.registry import candidates


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
    return algo.predict(prob, op, reuse) / parts_for(prob)
