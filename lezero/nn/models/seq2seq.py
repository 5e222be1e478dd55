"""A Transformer encoder-decoder for sequence-to-sequence tasks, built on
``nn.Transformer`` as in PyTorch's translation tutorial (token embeddings scaled by
sqrt(d_model), sinusoidal positions, a linear ``generator`` over the target vocabulary)."""
import math

import numpy as np

import lezero as lz
import lezero.functions as F
from lezero import cuda, nn


def sinusoidal_positions(max_len, d_model):
    """The sine/cosine position table of "Attention Is All You Need", (max_len, d_model)."""
    pos = np.arange(max_len, dtype=np.float64)[:, None]
    freq = np.exp(-math.log(10000.0) * np.arange(0, d_model, 2) / d_model)
    table = np.zeros((max_len, d_model))
    table[:, 0::2] = np.sin(pos * freq)
    table[:, 1::2] = np.cos(pos * freq[: d_model // 2])
    return table.astype(np.float32)


def sinusoids(positions, d_model):
    """The rows of ``sinusoidal_positions`` at ``positions`` (a (1, T) float64 Variable),
    (1, T, d_model) float32, computed with LeZero operators (sin and cos interleaved; an
    odd ``d_model`` drops the last cosine) so that a traced or exported model follows T."""
    freq = np.exp(-math.log(10000.0) * np.arange(0, d_model, 2) / d_model)
    args = F.expand_dims(positions, -1) * cuda.get_array_module(positions.data).asarray(freq)
    table = F.stack([F.sin(args), F.cos(args)], axis=-1).reshape(1, -1, 2 * len(freq))
    return (table[..., :d_model] if d_model % 2 else table).to(dtype=np.float32)


class PositionalEncoding(nn.Module):
    """Add the fixed sinusoidal table to (B, T, d_model) embeddings, then dropout.  The
    table is a non-persistent buffer: recomputed, never saved."""

    def __init__(self, d_model, dropout=0.1, max_len=512):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("pos_embedding", sinusoidal_positions(max_len, d_model),
                             persistent=False)

    def forward(self, x, positions=None):
        """``x`` plus the table's rows 0..T-1; ``positions`` (1, T) float64 Variable
        holding 0..T-1 computes them with LeZero operators instead (for a trace)."""
        T = x.shape[1]
        if T > self.pos_embedding.shape[0]:
            raise ValueError(f"PositionalEncoding: sequence length {T} exceeds max_len "
                             f"{self.pos_embedding.shape[0]}")
        if positions is None:
            return self.dropout(x + self.pos_embedding[:T].astype(x.dtype))
        table = sinusoids(positions, self.pos_embedding.shape[1])
        return self.dropout(x + table.to(dtype=x.dtype))


class Seq2SeqTransformer(nn.Module):
    """Source ids (B, S) and target ids (B, T) -> logits (B, T, tgt_vocab).

    The decoder sees the target shifted right by the caller (teacher forcing) and a
    causal mask made here; padding masks mark pad positions with True.  ``greedy_decode``
    translates without targets.
    """

    def __init__(self, src_vocab, tgt_vocab, d_model=128, nhead=4, num_encoder_layers=2,
                 num_decoder_layers=2, dim_feedforward=256, dropout=0.1, max_len=512):
        super().__init__()
        self.d_model = d_model
        self.src_tok_emb = nn.Embedding(src_vocab, d_model)
        self.tgt_tok_emb = nn.Embedding(tgt_vocab, d_model)
        self.positional_encoding = PositionalEncoding(d_model, dropout, max_len)
        self.transformer = nn.Transformer(d_model=d_model, nhead=nhead,
                                          num_encoder_layers=num_encoder_layers,
                                          num_decoder_layers=num_decoder_layers,
                                          dim_feedforward=dim_feedforward, dropout=dropout,
                                          batch_first=True)
        self.generator = nn.Linear(d_model, tgt_vocab)

    def _embed(self, emb, ids):
        """Scaled token embeddings plus positions 0..T-1, the positions counted from the
        ids by LeZero operators (a cumulative sum of ones) so that a trace follows T."""
        if not isinstance(ids, lz.Variable):
            ids = lz.Variable(ids, requires_grad=False)
        positions = F.cumsum(ids[:1].to(dtype=np.float64) * 0.0 + 1.0, axis=1) - 1.0
        return self.positional_encoding(emb(ids) * math.sqrt(self.d_model), positions)

    @staticmethod
    def _causal_mask(tgt):
        """(T, T): 0 on and below the diagonal, -inf above, made from the target ids by
        LeZero operators (no gradient flows: the ids are integers), so that a traced or
        exported model follows the target's length."""
        if not isinstance(tgt, lz.Variable):
            tgt = lz.Variable(tgt, requires_grad=False)
        ones = tgt[:1].to(dtype=np.float32) * 0.0 + 1.0                  # (1, T)
        return F.triu(ones.reshape(-1, 1) * ones * -np.inf, k=1)

    def encode(self, src, src_key_padding_mask=None):
        """The encoder's memory (B, S, d_model)."""
        return self.transformer.encoder(self._embed(self.src_tok_emb, src),
                                        src_key_padding_mask=src_key_padding_mask)

    def decode(self, tgt, memory, tgt_key_padding_mask=None, memory_key_padding_mask=None):
        """Decoder states (B, T, d_model) for target prefix ``tgt`` given ``memory``."""
        mask = self._causal_mask(tgt)
        return self.transformer.decoder(self._embed(self.tgt_tok_emb, tgt), memory,
                                        tgt_mask=mask,
                                        tgt_key_padding_mask=tgt_key_padding_mask,
                                        memory_key_padding_mask=memory_key_padding_mask)

    def forward(self, src, tgt, src_key_padding_mask=None, tgt_key_padding_mask=None):
        memory = self.encode(src, src_key_padding_mask)
        out = self.decode(tgt, memory, tgt_key_padding_mask, src_key_padding_mask)
        return self.generator(out)

    def greedy_decode(self, src, max_len, bos, eos=None, src_key_padding_mask=None):
        """Translate ``src`` (B, S) by picking the likeliest token at each step; returns
        int ids (B, <= max_len) starting with ``bos`` (stops early when all reach eos).
        Pass the ``src_key_padding_mask`` used in training when sources are padded."""
        xp = cuda.get_array_module(self.generator.weight.data)
        src = xp.asarray(src)
        mask = src_key_padding_mask
        was_training = self.training
        self.eval()
        try:
            with lz.no_grad():
                memory = self.encode(src, mask)
                ys = xp.full((src.shape[0], 1), bos, dtype=np.int64)
                done = xp.zeros(src.shape[0], dtype=bool)
                for _ in range(max_len - 1):
                    out = self.decode(ys, memory, memory_key_padding_mask=mask)
                    nxt = self.generator(out[:, -1]).data.argmax(axis=-1)
                    ys = xp.concatenate([ys, nxt[:, None].astype(np.int64)], axis=1)
                    if eos is not None:
                        done |= nxt == eos
                        if bool(done.all()):
                            break
        finally:
            self.train(was_training)
        return ys
