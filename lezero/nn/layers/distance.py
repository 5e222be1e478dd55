"""Distance layers: ``CosineSimilarity`` and ``PairwiseDistance``, thin modules over the
``lezero.functions`` operators of the same names with ``torch.nn``'s constructor arguments
(``dim`` is passed to the operator as ``axis``).  They have no parameters and take two
inputs, which broadcast.
"""
import lezero.functions as F
from lezero.nn.layers._utils import op_module
class CosineSimilarity(op_module(F.cosine_similarity, ("dim", 1, "int"), ("eps", 1e-8, "number"),
                                 n_inputs=2)):
    """Cosine similarity of ``x1`` and ``x2`` along ``dim``, each norm clamped from below by
    ``eps``, as ``torch.nn.CosineSimilarity``."""


class PairwiseDistance(op_module(F.pairwise_distance, ("p", 2.0, "number"),
                                 ("eps", 1e-6, "number"), ("keepdim", False, "bool"),
                                 n_inputs=2)):
    """``||x1 - x2 + eps||_p`` over the last axis, as ``torch.nn.PairwiseDistance``."""
