"""``MultiheadAttention``, as ``torch.nn.MultiheadAttention``.

The projections are PyTorch's parameters: one packed ``in_proj_weight`` (3E, E) when query,
key and value have the same size (``q_proj_weight``, ``k_proj_weight``, ``v_proj_weight``
otherwise), ``in_proj_bias`` (3E,), the output projection as a ``Linear`` submodule named
``out_proj``, and with ``add_bias_kv`` the learnt extra key/value ``bias_k``, ``bias_v``
(1, 1, E).  The computation is ``F.multi_head_attention_forward``.
"""
import numpy as np

from lezero import cuda
from lezero.core import Variable
import lezero.functions as F
from lezero.nn import init
from lezero.nn.layers._utils import empty_parameter, named_errors
from lezero.nn.layers.linear import Linear
from lezero.nn.module import Module
from lezero.utils.checks import check_bools, check_number, check_positive_ints


def causal_mask(size, like=None):
    """The (size, size) float mask that stops position i attending to j > i: 0 on and
    below the diagonal, -inf above (PyTorch's ``generate_square_subsequent_mask``).
    ``like`` (an array or Variable) picks the array module and float dtype."""
    data = like.data if isinstance(like, Variable) else like
    xp = np if data is None else cuda.get_array_module(data)
    dtype = np.float32 if data is None or data.dtype.kind != "f" else data.dtype
    upper = xp.triu(xp.ones((size, size), dtype=bool), k=1)
    return xp.where(upper, -np.inf, 0.0).astype(dtype)


class MultiheadAttention(Module):
    """Attention from ``num_heads`` heads of size embed_dim / num_heads, each attending
    over the keys, concatenated and projected by ``out_proj``.

    ``forward(query, key, value, key_padding_mask=None, need_weights=True,
    attn_mask=None, average_attn_weights=True, is_causal=False)`` returns ``(output,
    weights)``: query (L, N, E) ((N, L, E) with ``batch_first``; unbatched (L, E)), key
    and value (S, N, kdim / vdim).  ``weights`` is (N, L, S) averaged over heads, (N,
    heads, L, S) otherwise, or None without ``need_weights``.  Masks may be bool (True =
    masked out) or float (added to the scores).  ``is_causal`` with no ``attn_mask`` masks
    the future (PyTorch requires the mask; here it is made for you).
    """

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False,
                 add_zero_attn=False, kdim=None, vdim=None, batch_first=False):
        super().__init__()
        name = "MultiheadAttention"
        check_positive_ints(name, embed_dim=embed_dim, num_heads=num_heads)
        if embed_dim % num_heads:
            raise ValueError(f"{name}: embed_dim ({embed_dim}) must be divisible by num_heads "
                             f"({num_heads})")
        check_bools(name, bias=bias, add_bias_kv=add_bias_kv, add_zero_attn=add_zero_attn,
                    batch_first=batch_first)
        kdim = embed_dim if kdim is None else kdim
        vdim = embed_dim if vdim is None else vdim
        check_positive_ints(name, kdim=kdim, vdim=vdim)
        self.embed_dim, self.num_heads, self.head_dim = embed_dim, num_heads, \
            embed_dim // num_heads
        self.kdim, self.vdim = kdim, vdim
        self._qkv_same_embed_dim = kdim == embed_dim and vdim == embed_dim
        self.dropout = check_number(name, "dropout", dropout, 0.0, 1.0)
        self.batch_first, self.add_zero_attn = batch_first, add_zero_attn

        # Registration order is PyTorch's, so state_dict keys come out in its order.
        if self._qkv_same_embed_dim:
            self.in_proj_weight = empty_parameter(3 * embed_dim, embed_dim)
            for p in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
                self.register_parameter(p, None)
        else:
            self.q_proj_weight = empty_parameter(embed_dim, embed_dim)
            self.k_proj_weight = empty_parameter(embed_dim, kdim)
            self.v_proj_weight = empty_parameter(embed_dim, vdim)
            self.register_parameter("in_proj_weight", None)
        self.register_parameter("in_proj_bias",
                                empty_parameter(3 * embed_dim) if bias else None)
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias)
        if add_bias_kv:
            self.bias_k = empty_parameter(1, 1, embed_dim)
            self.bias_v = empty_parameter(1, 1, embed_dim)
        else:
            self.register_parameter("bias_k", None)
            self.register_parameter("bias_v", None)
        self._reset_parameters()

    def _reset_parameters(self):
        """PyTorch's: Xavier-uniform projections, zero biases, Xavier-normal bias_k/v (the
        output projection keeps Linear's weight initialisation)."""
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            for p in (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight):
                init.xavier_uniform_(p)
        if self.in_proj_bias is not None:
            init.zeros_(self.in_proj_bias)
            init.zeros_(self.out_proj.bias)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
            init.xavier_normal_(self.bias_v)

    def _check_inputs(self, query, key, value):
        name = "MultiheadAttention"
        for arg, x, size in (("query", query, self.embed_dim), ("key", key, self.kdim),
                             ("value", value, self.vdim)):
            if x.ndim not in (2, 3) or x.shape[-1] != size:
                raise ValueError(f"{name}: {arg} must be (L, N, {size}), (N, L, {size}) with "
                                 f"batch_first, or unbatched (L, {size}); got shape {x.shape}")
        if not query.ndim == key.ndim == value.ndim:
            raise ValueError(f"{name}: query, key and value must all be batched or all "
                             f"unbatched, got shapes {query.shape}, {key.shape}, {value.shape}")

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True,
                attn_mask=None, average_attn_weights=True, is_causal=False):
        self._check_inputs(query, key, value)
        batched = query.ndim == 3
        if self.batch_first and batched:
            query, key, value = (F.swapaxes(x, 0, 1) for x in (query, key, value))
        if is_causal and attn_mask is None:
            attn_mask = causal_mask(query.shape[0], query)
        separate = {}
        if not self._qkv_same_embed_dim:
            separate = dict(use_separate_proj_weight=True, q_proj_weight=self.q_proj_weight,
                            k_proj_weight=self.k_proj_weight, v_proj_weight=self.v_proj_weight)
        with named_errors("MultiheadAttention"):
            out, weights = F.multi_head_attention_forward(
                query, key, value, self.embed_dim, self.num_heads, self.in_proj_weight,
                self.in_proj_bias, self.bias_k, self.bias_v, self.add_zero_attn, self.dropout,
                self.out_proj.weight, self.out_proj.bias, training=self.training,
                key_padding_mask=key_padding_mask, need_weights=need_weights,
                attn_mask=attn_mask, average_attn_weights=average_attn_weights,
                is_causal=is_causal, **separate)
        if self.batch_first and batched:
            out = F.swapaxes(out, 0, 1)
        return out, weights

    def extra_repr(self):
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}"
