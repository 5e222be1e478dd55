"""Attention: ``scaled_dot_product_attention`` and ``multi_head_attention_forward``.

* ``scaled_dot_product``  the operator, its plain path (LeZero operators, differentiable
                          twice) and the choice of path
* ``chunked``             the chunked path: blocks of query rows, O(L) memory
* ``masked_softmax``      the fused softmax of the scores (a Numba kernel in float32)
* ``multi_head``          multi_head_attention_forward, (L, N, E) layout
"""
from lezero.functions.attention.multi_head import multi_head_attention_forward
from lezero.functions.attention.scaled_dot_product import scaled_dot_product_attention

__all__ = ["scaled_dot_product_attention", "multi_head_attention_forward"]
