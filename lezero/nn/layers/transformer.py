"""Transformer layers, stacks and the full encoder-decoder, as ``torch.nn.Transformer*``.

Submodule names are PyTorch's (``self_attn``, ``multihead_attn``, ``linear1``,
``dropout``, ``linear2``, ``norm1..3``, ``dropout1..3``; stacks hold ``layers`` and
``norm``), so their state_dicts load from PyTorch's as they are.  Sequences are (S, N, E),
or (N, S, E) with ``batch_first``.  Masks follow ``MultiheadAttention``: ``*_mask`` (L, S)
bool (True = blocked) or float (added), ``*_key_padding_mask`` (N, S) with True at padding.
An ``is_causal`` flag without a mask makes the causal mask (PyTorch needs it given).
"""
import copy

import lezero.functions as F
from lezero.nn import init
from lezero.nn.containers import ModuleList
from lezero.nn.layers.attention import MultiheadAttention, causal_mask
from lezero.nn.layers.dropout import Dropout
from lezero.nn.layers.linear import Linear
from lezero.nn.layers.normalization import LayerNorm
from lezero.nn.module import Module
from lezero.utils.checks import check_bools, check_number, check_positive_ints

_ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu}


def _activation(layer, activation):
    if isinstance(activation, str):
        if activation not in _ACTIVATIONS:
            raise ValueError(f"{layer}: activation must be 'relu', 'gelu' or a callable, got "
                             f"{activation!r}")
        return _ACTIVATIONS[activation]
    if not callable(activation):
        raise TypeError(f"{layer}: activation must be 'relu', 'gelu' or a callable, got "
                        f"{type(activation).__name__}")
    return activation


def _mask_for(is_causal, mask, x, seq_axis):
    """The mask to use: the given one, or the causal mask when only the flag was set."""
    if is_causal and mask is None:
        return causal_mask(x.shape[seq_axis], x)
    return mask


def _clones(module, n):
    """``n`` independent deep copies (PyTorch's stacks copy the layer they are given)."""
    return ModuleList([copy.deepcopy(module) for _ in range(n)])


class _Block(Module):
    """What encoder and decoder layers share: the feed-forward sub-block, the
    checks and the constructor arguments."""

    def _setup(self, d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps,
               batch_first, norm_first, bias, sublayers):
        """Check the arguments and build the sub-modules in PyTorch's order (so the
        state_dict keys line up): self-attention, cross-attention for a decoder
        (``sublayers`` == 3), the feed-forward pair, then one LayerNorm and one Dropout per
        sub-layer."""
        name = type(self).__name__
        check_positive_ints(name, d_model=d_model, nhead=nhead,
                            dim_feedforward=dim_feedforward)
        check_bools(name, batch_first=batch_first, norm_first=norm_first, bias=bias)
        check_number(name, "dropout", dropout, 0.0, 1.0)
        check_number(name, "layer_norm_eps", layer_norm_eps, 0.0)
        self.d_model, self.batch_first, self.norm_first = d_model, batch_first, norm_first
        act = _activation(name, activation)
        attention = dict(dropout=dropout, bias=bias, batch_first=batch_first)
        self.self_attn = MultiheadAttention(d_model, nhead, **attention)
        if sublayers == 3:
            self.multihead_attn = MultiheadAttention(d_model, nhead, **attention)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias)
        for k in range(1, sublayers + 1):
            setattr(self, f"norm{k}", LayerNorm(d_model, eps=layer_norm_eps, bias=bias))
        for k in range(1, sublayers + 1):
            setattr(self, f"dropout{k}", Dropout(dropout))
        self.activation = act

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                           need_weights=False, is_causal=is_causal)[0]
        return self.dropout1(x)

    def _ff_block(self, x, last_dropout):
        x = self.linear2(self.dropout(self.activation(self.linear1(x))))
        return last_dropout(x)

    def _check(self, arg, x):
        if x.ndim not in (2, 3) or x.shape[-1] != self.d_model:
            layout = "(N, S, E)" if self.batch_first else "(S, N, E)"
            raise ValueError(f"{type(self).__name__}: {arg} must be {layout} (or (S, E)) with "
                             f"E = d_model = {self.d_model}, got shape {x.shape}")

    @property
    def _seq_axis(self):
        return 1 if self.batch_first else 0


class TransformerEncoderLayer(_Block):
    """Self-attention then a feed-forward network, each with a residual connection and
    LayerNorm (after the residual, or before the sub-block with ``norm_first``), as
    ``torch.nn.TransformerEncoderLayer``."""

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu",
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True):
        super().__init__()
        self._setup(d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps,
                    batch_first, norm_first, bias, sublayers=2)

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        self._check("src", src)
        src_mask = _mask_for(is_causal, src_mask, src, self._seq_axis if src.ndim == 3 else 0)
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            x = x + self._ff_block(self.norm2(x), self.dropout2)
        else:
            x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
            x = self.norm2(x + self._ff_block(x, self.dropout2))
        return x


class TransformerDecoderLayer(_Block):
    """Self-attention, attention over the encoder's ``memory``, then a feed-forward
    network, each with a residual connection and LayerNorm, as
    ``torch.nn.TransformerDecoderLayer``."""

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu",
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True):
        super().__init__()
        self._setup(d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps,
                    batch_first, norm_first, bias, sublayers=3)

    def _mha_block(self, x, mem, attn_mask, key_padding_mask, is_causal):
        x = self.multihead_attn(x, mem, mem, attn_mask=attn_mask,
                                key_padding_mask=key_padding_mask, need_weights=False,
                                is_causal=is_causal)[0]
        return self.dropout2(x)

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False):
        self._check("tgt", tgt)
        self._check("memory", memory)
        axis = self._seq_axis if tgt.ndim == 3 else 0
        tgt_mask = _mask_for(tgt_is_causal, tgt_mask, tgt, axis)
        if memory_is_causal and memory_mask is None:
            raise ValueError(f"{type(self).__name__}: memory_is_causal needs memory_mask (the "
                             "target and memory lengths may differ)")
        x = tgt
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask,
                                   tgt_is_causal)
            x = x + self._mha_block(self.norm2(x), memory, memory_mask,
                                    memory_key_padding_mask, memory_is_causal)
            x = x + self._ff_block(self.norm3(x), self.dropout3)
        else:
            x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask,
                                              tgt_is_causal))
            x = self.norm2(x + self._mha_block(x, memory, memory_mask,
                                               memory_key_padding_mask, memory_is_causal))
            x = self.norm3(x + self._ff_block(x, self.dropout3))
        return x


class TransformerEncoder(Module):
    """``num_layers`` copies of ``encoder_layer`` (as ``layers``) and an optional final
    ``norm``, as ``torch.nn.TransformerEncoder`` (``enable_nested_tensor`` and
    ``mask_check`` are accepted and unused: there is no nested-tensor fast path)."""

    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True,
                 mask_check=True):
        super().__init__()
        if not isinstance(encoder_layer, Module):
            raise TypeError(f"TransformerEncoder: encoder_layer must be a Module, got "
                            f"{type(encoder_layer).__name__}")
        check_positive_ints("TransformerEncoder", num_layers=num_layers)
        self.layers = _clones(encoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm
        self.enable_nested_tensor, self.mask_check = enable_nested_tensor, mask_check

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        output = src
        for layer in self.layers:
            output = layer(output, src_mask=mask, src_key_padding_mask=src_key_padding_mask,
                           is_causal=bool(is_causal))
        return output if self.norm is None else self.norm(output)


class TransformerDecoder(Module):
    """``num_layers`` copies of ``decoder_layer`` (as ``layers``) and an optional final
    ``norm``, as ``torch.nn.TransformerDecoder``."""

    def __init__(self, decoder_layer, num_layers, norm=None):
        super().__init__()
        if not isinstance(decoder_layer, Module):
            raise TypeError(f"TransformerDecoder: decoder_layer must be a Module, got "
                            f"{type(decoder_layer).__name__}")
        check_positive_ints("TransformerDecoder", num_layers=num_layers)
        self.layers = _clones(decoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False):
        output = tgt
        for layer in self.layers:
            output = layer(output, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                           tgt_key_padding_mask=tgt_key_padding_mask,
                           memory_key_padding_mask=memory_key_padding_mask,
                           tgt_is_causal=bool(tgt_is_causal),
                           memory_is_causal=memory_is_causal)
        return output if self.norm is None else self.norm(output)


class Transformer(Module):
    """The encoder-decoder of "Attention Is All You Need", as ``torch.nn.Transformer``:
    ``encoder`` (a TransformerEncoder with a final LayerNorm) and ``decoder`` (likewise),
    every matrix re-initialised Xavier-uniform.  ``forward(src, tgt, ...)`` returns the
    decoder output, (T, N, E) ((N, T, E) with ``batch_first``)."""

    def __init__(self, d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6,
                 dim_feedforward=2048, dropout=0.1, activation="relu", custom_encoder=None,
                 custom_decoder=None, layer_norm_eps=1e-5, batch_first=False,
                 norm_first=False, bias=True):
        super().__init__()
        options = dict(dim_feedforward=dim_feedforward, dropout=dropout, activation=activation,
                       layer_norm_eps=layer_norm_eps, batch_first=batch_first,
                       norm_first=norm_first, bias=bias)
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            self.encoder = TransformerEncoder(
                TransformerEncoderLayer(d_model, nhead, **options), num_encoder_layers,
                LayerNorm(d_model, eps=layer_norm_eps, bias=bias))
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            self.decoder = TransformerDecoder(
                TransformerDecoderLayer(d_model, nhead, **options), num_decoder_layers,
                LayerNorm(d_model, eps=layer_norm_eps, bias=bias))
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first
        self._reset_parameters()

    def _reset_parameters(self):
        for p in self.parameters():
            if p.ndim > 1:
                init.xavier_uniform_(p)

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None,
                src_key_padding_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, src_is_causal=None, tgt_is_causal=None,
                memory_is_causal=False):
        batch_axis = 0 if self.batch_first else 1
        if src.ndim != tgt.ndim or (src.ndim == 3 and
                                    src.shape[batch_axis] != tgt.shape[batch_axis]):
            raise ValueError(f"Transformer: src and tgt must have the same batch size, got "
                             f"shapes {src.shape} and {tgt.shape} (batch_first="
                             f"{self.batch_first})")
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise ValueError(f"Transformer: the feature size of src and tgt must be d_model = "
                             f"{self.d_model}, got shapes {src.shape} and {tgt.shape}")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask,
                            tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz, dtype=None):
        """A (sz, sz) float32 array, -inf above the diagonal and 0 elsewhere: added to the
        attention scores, it stops each position attending to later ones."""
        mask = causal_mask(sz)
        return mask if dtype is None else mask.astype(dtype)
