"""Loss layers: each wraps one ``lezero.functions`` loss, with ``torch.nn``'s constructor
arguments, made from an argument spec by ``op_module``.

``forward`` takes the operator's tensors in its order -- ``(input, target)`` for most,
``(input1, input2, target)`` for the pairwise ones, ``(log_probs, targets, input_lengths,
target_lengths)`` for CTC -- and the module's options are passed on.  A class ``weight``
(and ``pos_weight``) is registered as a buffer, so it appears in ``state_dict`` exactly
when PyTorch's does.  The deprecated ``size_average`` / ``reduce`` arguments are accepted
and turned into ``reduction`` as PyTorch does.
"""
import lezero.functions as F
from lezero.nn.layers._utils import OpModule, op_module
_REDUCTIONS = ("none", "mean", "sum")
_SA, _RE = ("size_average", None, "any"), ("reduce", None, "any")    # deprecated
_REDUCTION = ("reduction", "mean", _REDUCTIONS)
_WEIGHT = ("weight", None, "buffer")
_IGNORE = ("ignore_index", -100, "int")


class _Loss(OpModule):
    """Base of the loss layers: resolves the legacy reduction arguments."""

    _not_passed = ("size_average", "reduce")

    def _validate(self):
        size_average = getattr(self, "size_average", None)
        reduce = getattr(self, "reduce", None)
        if size_average is not None or reduce is not None:
            size_average = True if size_average is None else size_average
            reduce = True if reduce is None else reduce
            self.reduction = "mean" if size_average and reduce else "sum" if reduce else "none"


def _loss(fn, *spec, n_inputs=2):
    return op_module(fn, *spec, n_inputs=n_inputs, base=_Loss)


class L1Loss(_loss(F.l1_loss, _SA, _RE, _REDUCTION)):
    """Mean (or sum) of |input - target|, as ``torch.nn.L1Loss``."""


class MSELoss(_loss(F.mse_loss, _SA, _RE, _REDUCTION)):
    """Mean (or sum) of (input - target) ** 2, as ``torch.nn.MSELoss``."""


class CrossEntropyLoss(_loss(F.cross_entropy, _WEIGHT, _SA, _IGNORE, _RE, _REDUCTION,
                             ("label_smoothing", 0.0, "number"))):
    """Softmax cross entropy of logits (N, C, ...) against class indices or class
    probabilities, with optional class ``weight`` and ``label_smoothing``, as
    ``torch.nn.CrossEntropyLoss``."""


class NLLLoss(_loss(F.nll_loss, _WEIGHT, _SA, _IGNORE, _RE, _REDUCTION)):
    """Negative log-likelihood of log-probabilities (N, C, ...) at the target classes, as
    ``torch.nn.NLLLoss``."""


class SmoothL1Loss(_loss(F.smooth_l1_loss, _SA, _RE, _REDUCTION, ("beta", 1.0, "number"))):
    """Quadratic below ``beta``, linear above (divided by beta), as
    ``torch.nn.SmoothL1Loss``."""


class HuberLoss(_loss(F.huber_loss, _REDUCTION, ("delta", 1.0, "number"))):
    """Quadratic below ``delta``, linear above, as ``torch.nn.HuberLoss``."""


class BCELoss(_loss(F.binary_cross_entropy, _WEIGHT, _SA, _RE, _REDUCTION)):
    """Binary cross entropy of probabilities, as ``torch.nn.BCELoss``."""


class BCEWithLogitsLoss(_loss(F.binary_cross_entropy_with_logits, _WEIGHT, _SA, _RE,
                              _REDUCTION, ("pos_weight", None, "buffer"))):
    """Binary cross entropy of logits (a stable sigmoid inside), with ``weight`` and
    ``pos_weight``, as ``torch.nn.BCEWithLogitsLoss``."""


class KLDivLoss(_loss(F.kl_div, _SA, _RE, ("reduction", "mean", _REDUCTIONS + ("batchmean",)),
                      ("log_target", False, "bool"))):
    """KL divergence of ``target`` from log-probabilities ``input``; use
    ``reduction="batchmean"`` for the true divergence per sample, as
    ``torch.nn.KLDivLoss``."""


class CTCLoss(_loss(F.ctc_loss, ("blank", 0, "int"), _REDUCTION,
                    ("zero_infinity", False, "bool"), n_inputs=4)):
    """Connectionist temporal classification loss; ``forward(log_probs, targets,
    input_lengths, target_lengths)``, as ``torch.nn.CTCLoss``."""


class PoissonNLLLoss(_loss(F.poisson_nll_loss, ("log_input", True, "bool"),
                           ("full", False, "bool"), _SA, ("eps", 1e-8, "number"), _RE,
                           _REDUCTION)):
    """Poisson negative log-likelihood of rates (or log-rates), as
    ``torch.nn.PoissonNLLLoss``."""


class GaussianNLLLoss(_loss(F.gaussian_nll_loss, "*", ("full", False, "bool"),
                            ("eps", 1e-6, "number"), _REDUCTION, n_inputs=3)):
    """Gaussian negative log-likelihood; ``forward(input, target, var)``, as
    ``torch.nn.GaussianNLLLoss``."""


class CosineEmbeddingLoss(_loss(F.cosine_embedding_loss, ("margin", 0.0, "number"), _SA, _RE,
                                _REDUCTION, n_inputs=3)):
    """1 - cos(x1, x2) for target 1, max(0, cos - margin) for -1; ``forward(input1,
    input2, target)``, as ``torch.nn.CosineEmbeddingLoss``."""


class MarginRankingLoss(_loss(F.margin_ranking_loss, ("margin", 0.0, "number"), _SA, _RE,
                              _REDUCTION, n_inputs=3)):
    """max(0, -target * (x1 - x2) + margin); ``forward(input1, input2, target)``, as
    ``torch.nn.MarginRankingLoss``."""


class HingeEmbeddingLoss(_loss(F.hinge_embedding_loss, ("margin", 1.0, "number"), _SA, _RE,
                               _REDUCTION)):
    """x for target 1, max(0, margin - x) for -1, as ``torch.nn.HingeEmbeddingLoss``."""


class TripletMarginLoss(_loss(F.triplet_margin_loss, ("margin", 1.0, "number"),
                              ("p", 2.0, "number"), ("eps", 1e-6, "number"),
                              ("swap", False, "bool"), _SA, _RE, _REDUCTION, n_inputs=3)):
    """max(0, d(a, p) - d(a, n) + margin); ``forward(anchor, positive, negative)``, as
    ``torch.nn.TripletMarginLoss``."""


class SoftMarginLoss(_loss(F.soft_margin_loss, _SA, _RE, _REDUCTION)):
    """log(1 + exp(-target * input)) for labels 1 / -1, as ``torch.nn.SoftMarginLoss``."""


class MultiLabelSoftMarginLoss(_loss(F.multilabel_soft_margin_loss, _WEIGHT, _SA, _RE,
                                     _REDUCTION)):
    """Binary cross entropy of logits (N, C) against 0 / 1 labels, averaged over the
    classes, with an optional per-class ``weight`` (a buffer), as
    ``torch.nn.MultiLabelSoftMarginLoss``."""


class MultiMarginLoss(_loss(F.multi_margin_loss, ("p", 1, "number"), ("margin", 1.0, "number"),
                            _WEIGHT, _SA, _RE, _REDUCTION)):
    """The multi-class hinge of scores (N, C) against class indices (N,), with ``p`` 1 or
    2 and an optional per-class ``weight`` (a buffer), as ``torch.nn.MultiMarginLoss``."""

    def _validate(self):
        super()._validate()
        if self.p not in (1, 2):
            raise ValueError(f"MultiMarginLoss: p must be 1 or 2 (only these are "
                             f"supported), got {self.p!r}")


class MultiLabelMarginLoss(_loss(F.multilabel_margin_loss, _SA, _RE, _REDUCTION)):
    """The multi-label hinge of scores (N, C) against class lists (N, C) padded with -1,
    as ``torch.nn.MultiLabelMarginLoss``."""
