"""A GRU encoder-decoder with Bahdanau (additive) attention (Bahdanau et al., 2015).

* encoder: ``src_embed`` then a bidirectional ``nn.GRU`` (``encoder``), giving each
  source position a 2H-vector (``batch_first``);
* the decoder starts from ``tanh(bridge(mean of the encoder outputs))`` (the mean over
  real tokens, so right padding does not leak into it);
* at step t, ``attention`` scores every source position from the previous decoder state
  s: ``v . tanh(W_q s + W_k h_j)`` (padding masked out), and the context c is the
  softmax-weighted mean of the h_j;
* ``decoder`` (a ``GRUCell``) takes [embedding of the previous target token, c];
  ``out`` maps [s_t, c, embedding] to the next-token logits.

``forward(src, tgt_in)`` is teacher forcing (logits (B, T, tgt_vocab) for the target
shifted right); ``greedy_decode`` generates.  Source padding (``pad_idx``, on the right)
is masked in the attention; the reverse GRU direction does read it (as ``nn.GRU``
without packed sequences).
"""
import numpy as np

import lezero as lz
import lezero.functions as F
from lezero import cuda, nn
from lezero.nn.models._hf import min_value
from lezero.nn.models.registry import register_model
from lezero.utils.checks import check_int, check_number

__all__ = ["BahdanauAttention", "GRUSeq2Seq"]


class BahdanauAttention(nn.Module):
    """Additive attention: scores ``v(tanh(query(s) + key(h)))`` over the source."""

    def __init__(self, query_dim, key_dim, attn_dim):
        super().__init__()
        self.query = nn.Linear(query_dim, attn_dim, bias=False)
        self.key = nn.Linear(key_dim, attn_dim)
        self.v = nn.Linear(attn_dim, 1, bias=False)

    def forward(self, state, keys, projected_keys, bias=None):
        """``state`` (B, Hq), ``keys`` (B, S, Hk), ``projected_keys`` = key(keys)
        (computed once per sequence), ``bias`` (B, S) added to the scores; returns the
        context (B, Hk) and the weights (B, S)."""
        scores = self.v(F.tanh(projected_keys + F.expand_dims(self.query(state), 1)))
        scores = scores.reshape(scores.shape[0], -1)
        if bias is not None:
            scores = scores + bias
        weights = F.softmax(scores, axis=-1)
        context = F.sum(keys * F.expand_dims(weights, -1), axis=1)
        return context, weights


@register_model("gru_seq2seq")
class GRUSeq2Seq(nn.Module):
    """``GRUSeq2Seq(src_vocab, tgt_vocab, embed_dim=32, hidden_size=64, attn_dim=64,
    pad_idx=0, dropout=0.0)``: see the module docstring."""

    def __init__(self, src_vocab, tgt_vocab, embed_dim=32, hidden_size=64, attn_dim=64,
                 pad_idx=0, dropout=0.0):
        super().__init__()
        name = "GRUSeq2Seq"
        for arg, value in (("src_vocab", src_vocab), ("tgt_vocab", tgt_vocab),
                           ("embed_dim", embed_dim), ("hidden_size", hidden_size),
                           ("attn_dim", attn_dim)):
            check_int(name, arg, value, low=1)
        self.pad_idx = check_int(name, "pad_idx", pad_idx, low=0,
                                 high=min(src_vocab, tgt_vocab) - 1)
        check_number(name, "dropout", dropout, low=0.0, high=1.0, high_open=True)
        H = hidden_size
        self.src_embed = nn.Embedding(src_vocab, embed_dim, padding_idx=pad_idx)
        self.encoder = nn.GRU(embed_dim, H, batch_first=True, bidirectional=True)
        self.bridge = nn.Linear(2 * H, H)
        self.attention = BahdanauAttention(H, 2 * H, attn_dim)
        self.tgt_embed = nn.Embedding(tgt_vocab, embed_dim, padding_idx=pad_idx)
        self.decoder = nn.GRUCell(embed_dim + 2 * H, H)
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Linear(3 * H + embed_dim, tgt_vocab)

    def encode(self, src):
        """Encoder outputs (B, S, 2H), their attention projections, the score bias
        (B, S) (``min_value`` at padding) and the decoder's first state (B, H).  The
        padding mask is computed from ``src`` with LeZero operators, so a traced or
        exported model keeps it following the input."""
        ids = src.data if isinstance(src, lz.Variable) else src
        if getattr(ids, "ndim", None) != 2 or ids.dtype.kind not in "iu":
            raise TypeError(f"GRUSeq2Seq: src must be an int array (batch, seq), got "
                            f"{type(src).__name__} {getattr(src, 'shape', '')}")
        keys, _ = self.encoder(self.dropout(self.src_embed(ids)))
        real = self._real_tokens(src, keys.dtype)                         # (B, S)
        mean = F.sum(keys * F.expand_dims(real, -1), axis=1) / \
            F.maximum(F.sum(real, axis=1, keepdims=True), 1.0)
        state = F.tanh(self.bridge(mean))
        bias = (1.0 - real) * min_value(keys.dtype)
        return keys, self.attention.key(keys), bias, state

    def _real_tokens(self, src, dtype):
        """1 where ``src`` is not ``pad_idx``, 0 where it is: ``min(|src - pad|, 1)``
        (exact for integer ids), as a (B, S) Variable of ``dtype``."""
        if not isinstance(src, lz.Variable):
            src = lz.Variable(src, requires_grad=False)
        return F.clip(F.abs((src - self.pad_idx).to(dtype=dtype)), 0.0, 1.0)

    def step(self, token, state, keys, projected, bias):
        """One decoder step from the previous token ids (B,): (logits (B, V), new state,
        attention weights (B, S))."""
        emb = self.dropout(self.tgt_embed(token))
        context, weights = self.attention(state, keys, projected, bias)
        state = self.decoder(F.concatenate([emb, context], axis=1), state)
        logits = self.out(self.dropout(F.concatenate([state, context, emb], axis=1)))
        return logits, state, weights

    def forward(self, src, tgt_in):
        """Teacher forcing: ``tgt_in`` (B, T) starts with the start token; returns the
        logits (B, T, tgt_vocab) of the tokens that follow."""
        if not isinstance(tgt_in, lz.Variable):          # sliced by LeZero operators,
            tgt_in = lz.Variable(tgt_in, requires_grad=False)     # so a trace follows it
        keys, projected, bias, state = self.encode(src)
        outputs = []
        for t in range(tgt_in.shape[1]):
            logits, state, _ = self.step(tgt_in[:, t], state, keys, projected, bias)
            outputs.append(logits)
        return F.stack(outputs, axis=1)

    def greedy_decode(self, src, bos_idx, eos_idx, max_len):
        """Ids (B, <= max_len) chosen by argmax from ``bos_idx`` on; a row stops growing
        (is padded with ``pad_idx``) after ``eos_idx``."""
        max_len = check_int("GRUSeq2Seq.greedy_decode", "max_len", max_len, low=1)
        with lz.no_grad():
            keys, projected, bias, state = self.encode(src)
            xp = cuda.get_array_module(keys.data)
            token = xp.full(keys.shape[0], bos_idx, dtype=np.int64)
            done = xp.zeros(keys.shape[0], dtype=bool)
            out = []
            for _ in range(max_len):
                logits, state, _ = self.step(token, state, keys, projected, bias)
                token = xp.where(done, self.pad_idx, logits.data.argmax(axis=1))
                out.append(token)
                done |= token == eos_idx
                if bool(done.all()):
                    break
        return cuda.as_numpy(xp.stack(out, axis=1))
