"""BERT with Hugging Face's ``BertForMaskedLM`` layout, names and numerics.

    model = BertForMaskedLM(vocab_size=99, hidden_size=32, num_hidden_layers=2,
                            num_attention_heads=4, intermediate_size=37)
    model.load_state_dict(hf_state_dict)          # HF's keys and shapes, as-is
    logits = model(input_ids, attention_mask)     # (batch, seq, vocab)

A post-norm Transformer encoder (each sublayer: LayerNorm(x + dropout(f(x)))) over word,
position and token-type embeddings, and the masked-LM head ``cls.predictions``: a dense
layer, the activation and a LayerNorm, then ``decoder`` onto the vocabulary.  With
``tie_word_embeddings`` (HF's default) the decoder's weight *is* the word embedding and
its bias *is* ``cls.predictions.bias``: the state_dict lists every name, as HF's does.
``mlm_mask`` makes BERT's 80/10/10 masked-LM inputs and labels.
"""
import numpy as np

import lezero as lz
import lezero.functions as F
from lezero import cuda, nn
from lezero.nn.models._hf import (activation, attention_bias, check_input_ids,
                                  init_hf_weights, require_false, resolve_config)
from lezero.nn.models.registry import register_model
from lezero.utils.checks import check_int, check_number

__all__ = ["BertModel", "BertForMaskedLM", "BERT_FIELDS", "mlm_mask"]

# BertConfig's fields that shape the network: name -> (HF's default, kind).
BERT_FIELDS = {
    "vocab_size": (30522, "int"), "hidden_size": (768, "int"),
    "num_hidden_layers": (12, "int"), "num_attention_heads": (12, "int"),
    "intermediate_size": (3072, "int"), "hidden_act": ("gelu", "act"),
    "hidden_dropout_prob": (0.1, "prob"), "attention_probs_dropout_prob": (0.1, "prob"),
    "max_position_embeddings": (512, "int"), "type_vocab_size": (2, "int"),
    "initializer_range": (0.02, "float"), "layer_norm_eps": (1e-12, "eps"),
    "pad_token_id": (0, "id?"), "tie_word_embeddings": (True, "bool"),
    "is_decoder": (False, "bool"), "add_cross_attention": (False, "bool"),
    "position_embedding_type": ("absolute", "any"),
}
BERT_IGNORED = {"classifier_dropout"}


class BertEmbeddings(nn.Module):
    """word + position + token-type embeddings, LayerNorm, dropout."""

    def __init__(self, cfg):
        super().__init__()
        self.word_embeddings = nn.Embedding(cfg.vocab_size, cfg.hidden_size,
                                            padding_idx=cfg.pad_token_id)
        self.position_embeddings = nn.Embedding(cfg.max_position_embeddings, cfg.hidden_size)
        self.token_type_embeddings = nn.Embedding(cfg.type_vocab_size, cfg.hidden_size)
        self.LayerNorm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)
        self.dropout = nn.Dropout(cfg.hidden_dropout_prob)

    def forward(self, ids, token_type_ids=None, position_ids=None):
        xp = cuda.get_array_module(ids)
        if position_ids is None:
            position_ids = xp.arange(ids.shape[1])[None]
        if token_type_ids is None:
            token_type_ids = xp.zeros_like(ids)
        x = (self.word_embeddings(ids) + self.token_type_embeddings(token_type_ids)
             + self.position_embeddings(position_ids))
        return self.dropout(self.LayerNorm(x))


class BertSelfAttention(nn.Module):
    """Multi-head attention with separate ``query``, ``key``, ``value`` projections."""

    def __init__(self, cfg):
        super().__init__()
        self.num_heads = cfg.num_attention_heads
        self.head_dim = cfg.hidden_size // cfg.num_attention_heads
        self.query = nn.Linear(cfg.hidden_size, cfg.hidden_size)
        self.key = nn.Linear(cfg.hidden_size, cfg.hidden_size)
        self.value = nn.Linear(cfg.hidden_size, cfg.hidden_size)
        self.dropout_p = cfg.attention_probs_dropout_prob

    def forward(self, x, bias=None):
        B, T, C = x.shape
        q, k, v = (p(x).reshape(B, T, self.num_heads, self.head_dim).transpose(0, 2, 1, 3)
                   for p in (self.query, self.key, self.value))
        y = F.scaled_dot_product_attention(
            q, k, v, attn_mask=bias, dropout_p=self.dropout_p if self.training else 0.0)
        return y.transpose(0, 2, 1, 3).reshape(B, T, C)


class BertResidualNorm(nn.Module):
    """HF's BertSelfOutput / BertOutput: LayerNorm(residual + dropout(dense(x)))."""

    def __init__(self, cfg, in_features):
        super().__init__()
        self.dense = nn.Linear(in_features, cfg.hidden_size)
        self.LayerNorm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)
        self.dropout = nn.Dropout(cfg.hidden_dropout_prob)

    def forward(self, x, residual):
        return self.LayerNorm(self.dropout(self.dense(x)) + residual)


class BertAttention(nn.Module):
    """``self`` (the attention) and ``output`` (projection, residual, norm)."""

    def __init__(self, cfg):
        super().__init__()
        self.self = BertSelfAttention(cfg)
        self.output = BertResidualNorm(cfg, cfg.hidden_size)

    def forward(self, x, bias=None):
        return self.output(self.self(x, bias), x)


class BertIntermediate(nn.Module):
    """dense -> activation (hidden -> intermediate)."""

    def __init__(self, cfg):
        super().__init__()
        self.dense = nn.Linear(cfg.hidden_size, cfg.intermediate_size)
        self.act = activation(cfg.hidden_act)

    def forward(self, x):
        return self.act(self.dense(x))


class BertLayer(nn.Module):
    """attention, then the feed-forward network (``intermediate``, ``output``)."""

    def __init__(self, cfg):
        super().__init__()
        self.attention = BertAttention(cfg)
        self.intermediate = BertIntermediate(cfg)
        self.output = BertResidualNorm(cfg, cfg.intermediate_size)

    def forward(self, x, bias=None):
        x = self.attention(x, bias)
        return self.output(self.intermediate(x), x)


class BertEncoder(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.layer = nn.ModuleList([BertLayer(cfg) for _ in range(cfg.num_hidden_layers)])

    def forward(self, x, bias=None):
        for layer in self.layer:
            x = layer(x, bias)
        return x


class BertModel(nn.Module):
    """``embeddings`` and ``encoder`` (no pooler: ``BertForMaskedLM`` builds it without)."""

    def __init__(self, cfg):
        super().__init__()
        self.config = cfg
        self.embeddings = BertEmbeddings(cfg)
        self.encoder = BertEncoder(cfg)

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None):
        cfg = self.config
        ids = check_input_ids("BertForMaskedLM", input_ids, cfg.vocab_size,
                              cfg.max_position_embeddings)
        x = self.embeddings(ids, token_type_ids, position_ids)
        B, T = ids.shape
        bias = attention_bias("BertForMaskedLM", attention_mask, B, T, T, x.dtype,
                              cuda.get_array_module(ids), causal=False)
        return self.encoder(x, bias)


class BertPredictionHeadTransform(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.dense = nn.Linear(cfg.hidden_size, cfg.hidden_size)
        self.act = activation(cfg.hidden_act)
        self.LayerNorm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)

    def forward(self, x):
        return self.LayerNorm(self.act(self.dense(x)))


class BertLMPredictionHead(nn.Module):
    """``transform`` then ``decoder`` (hidden -> vocabulary) and the output ``bias``."""

    def __init__(self, cfg):
        super().__init__()
        self.transform = BertPredictionHeadTransform(cfg)
        self.decoder = nn.Linear(cfg.hidden_size, cfg.vocab_size)
        self.bias = nn.Parameter(np.zeros(cfg.vocab_size, dtype=np.float32))
        if cfg.tie_word_embeddings:
            self.decoder.bias = self.bias

    def forward(self, x):
        return self.decoder(self.transform(x))


class BertOnlyMLMHead(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.predictions = BertLMPredictionHead(cfg)

    def forward(self, x):
        return self.predictions(x)


@register_model("bert")
class BertForMaskedLM(nn.Module):
    """HF's ``BertForMaskedLM``: ``bert`` (BertModel) and ``cls`` (the masked-LM head).

    Keyword arguments are ``BertConfig``'s fields with its defaults (``vocab_size=30522,
    hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
    intermediate_size=3072, hidden_act="gelu", hidden_dropout_prob=0.1,
    attention_probs_dropout_prob=0.1, max_position_embeddings=512, type_vocab_size=2,
    layer_norm_eps=1e-12, pad_token_id=0, tie_word_embeddings=True``).
    ``forward(input_ids, attention_mask=None, token_type_ids=None, position_ids=None)``
    returns the logits (B, T, vocab_size); ``loss(input_ids, labels, ...)`` HF's masked-LM
    loss (mean cross entropy over labels != -100).
    """

    def __init__(self, **config):
        super().__init__()
        cfg = resolve_config("BertForMaskedLM", BERT_FIELDS, config, ignored=BERT_IGNORED)
        require_false("BertForMaskedLM", cfg, "is_decoder", "add_cross_attention")
        if cfg.position_embedding_type != "absolute":
            raise NotImplementedError(f"BertForMaskedLM: position_embedding_type "
                                      f"{cfg.position_embedding_type!r} is not supported "
                                      f"(only 'absolute')")
        if cfg.hidden_size % cfg.num_attention_heads:
            raise ValueError(f"BertForMaskedLM: hidden_size ({cfg.hidden_size}) must be "
                             f"divisible by num_attention_heads ({cfg.num_attention_heads})")
        if cfg.pad_token_id is not None and cfg.pad_token_id >= cfg.vocab_size:
            raise ValueError(f"BertForMaskedLM: pad_token_id {cfg.pad_token_id} is outside "
                             f"the vocabulary (vocab_size {cfg.vocab_size})")
        self.config = cfg
        self.bert = BertModel(cfg)
        self.cls = BertOnlyMLMHead(cfg)
        init_hf_weights(self, cfg.initializer_range)
        if cfg.tie_word_embeddings:
            self.cls.predictions.decoder.weight = self.bert.embeddings.word_embeddings.weight

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None):
        return self.cls(self.bert(input_ids, attention_mask, token_type_ids, position_ids))

    def loss(self, input_ids, labels, attention_mask=None, token_type_ids=None,
             ignore_index=-100):
        """Mean cross entropy of the logits at the positions whose label is not
        ``ignore_index`` (HF's ``MaskedLMOutput.loss``)."""
        logits = self(input_ids, attention_mask, token_type_ids)
        labels = labels.data if isinstance(labels, lz.Variable) else labels
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1),
                               ignore_index=ignore_index)


def mlm_mask(input_ids, mask_token_id, vocab_size, rng, mlm_probability=0.15,
             special_ids=(), ignore_index=-100):
    """BERT's masked-LM corruption (HF's ``DataCollatorForLanguageModeling``).

    Each token not in ``special_ids`` is chosen with ``mlm_probability``; a chosen token
    becomes ``mask_token_id`` 80% of the time, a random token 10%, stays 10%.  Returns
    ``(inputs, labels)``: labels hold the original id where chosen, ``ignore_index``
    elsewhere.  ``rng`` is a NumPy Generator (the batch is reproducible from it)."""
    where = "mlm_mask"
    ids = np.asarray(input_ids)
    check_int(where, "mask_token_id", mask_token_id, low=0, high=vocab_size - 1)
    check_number(where, "mlm_probability", mlm_probability, low=0.0, high=1.0)
    chosen = rng.random(ids.shape) < mlm_probability
    chosen &= ~np.isin(ids, np.asarray(special_ids, dtype=ids.dtype))
    labels = np.where(chosen, ids, ignore_index).astype(np.int64)
    roll = rng.random(ids.shape)
    inputs = np.where(chosen & (roll < 0.8), mask_token_id, ids)
    random_ids = rng.integers(0, vocab_size, ids.shape)
    inputs = np.where(chosen & (roll >= 0.8) & (roll < 0.9), random_ids, inputs)
    return inputs.astype(ids.dtype), labels
