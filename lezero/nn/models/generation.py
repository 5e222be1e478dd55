"""Autoregressive generation for the decoder language models (GPT-2, LLaMA).

* ``KVCache``: each attention layer's keys and values of the tokens seen so far, so a
  step feeds only the newest token (the work of a step no longer grows with the text);
* ``filter_logits``: Hugging Face's sampling warpers in their order -- temperature,
  top-k, top-p (nucleus);
* ``GenerationMixin``: ``generate`` (greedy or sampled, with or without the cache, with
  left padding) and ``loss`` (HF's shifted next-token cross entropy) for a model whose
  ``forward(input_ids, attention_mask=None, position_ids=None, past_key_values=None)``
  returns logits (B, T, vocab); where the forward also takes HF's ``logits_to_keep``,
  each step asks for the last position's logits only (as HF's ``generate`` does: the
  vocabulary head over a whole prompt is the largest product of the prefill).
"""
import inspect

import numpy as np

import lezero as lz
import lezero.functions as F
from lezero import cuda
from lezero.core import get_config
from lezero.utils.checks import check_bool, check_int, check_number, describe

__all__ = ["KVCache", "filter_logits", "sample_next", "GenerationMixin"]


def _data(x):
    return x.data if isinstance(x, lz.Variable) else x


class KVCache:
    """Keys and values per layer, (B, kv_heads, T, head_dim) each, grown along T.

    Like HF's ``DynamicCache``: a model's attention layer ``i`` calls ``update(i, k, v)``
    with the new tokens' keys and values and attends over what it returns (the past and
    the new).  The model updates the cache in place.  Without gradients (``no_grad``, as
    ``generate`` runs) each layer writes into a preallocated buffer and returns views of
    its filled part, so a step copies only its new tokens, not the whole past (room for
    ``max_length`` positions at first, doubled when full); with gradients the past and
    the new are concatenated, so that gradients reach both.  ``layers[i]`` is the
    ``(key, value)`` layer ``i`` attends over."""

    def __init__(self, max_length=None):
        self.max_length = check_int("KVCache", "max_length", max_length, low=1,
                                    allow_none=True)
        self.layers = []
        self._room = []            # per layer: (key buffer, value buffer) or None

    def __len__(self):
        return len(self.layers)

    def get_seq_length(self):
        """How many positions the cache holds (0 when empty)."""
        return 0 if not self.layers else self.layers[0][0].shape[-2]

    def update(self, layer_idx, key, value):
        """Append ``key``/``value`` to layer ``layer_idx``; returns the whole (k, v)."""
        if not 0 <= layer_idx <= len(self.layers):
            raise IndexError(f"KVCache.update: layer {layer_idx} comes after "
                             f"{len(self.layers)} cached layers; layers fill in order")
        if layer_idx == len(self.layers):
            self.layers.append(None)
            self._room.append(None)
        if get_config().enable_backprop:
            self._concatenate(layer_idx, key, value)
        else:
            self._write(layer_idx, _data(key), _data(value))
        return self.layers[layer_idx]

    def _concatenate(self, i, key, value):
        if self.layers[i] is not None:
            past_k, past_v = self.layers[i]
            key = F.concatenate([past_k, key], axis=-2)
            value = F.concatenate([past_v, value], axis=-2)
        self.layers[i] = (key, value)
        self._room[i] = None

    def _write(self, i, key, value):
        past = 0 if self.layers[i] is None else self.layers[i][0].shape[-2]
        length = past + key.shape[-2]
        room = self._room[i]
        if (room is None or room[0].shape[-2] < length or room[0].dtype != key.dtype
                or room[0].shape[:-2] != key.shape[:-2]):
            room = self._grow(i, key, value, past, length)
        room[0][..., past:length, :] = key
        room[1][..., past:length, :] = value
        self.layers[i] = tuple(lz.Variable(r[..., :length, :], requires_grad=False)
                               for r in room)

    def _grow(self, i, key, value, past, length):
        """New buffers with room for at least ``length`` positions, holding the past."""
        old = 0 if self._room[i] is None else self._room[i][0].shape[-2]
        size = max(length, self.max_length or 0, 2 * old)
        xp = cuda.get_array_module(key)
        room = tuple(xp.empty(a.shape[:-2] + (size, a.shape[-1]), a.dtype)
                     for a in (key, value))
        if past:
            for buf, kept in zip(room, self.layers[i]):
                buf[..., :past, :] = kept.data
        self._room[i] = room
        return room


def filter_logits(logits, temperature=1.0, top_k=None, top_p=None):
    """Float64 logits (B, V) with HF's warpers applied: divided by ``temperature``, then
    everything below the ``top_k``-th largest set to -inf (ties kept), then the least
    likely tokens whose total probability is at most ``1 - top_p`` removed (at least one
    token always stays)."""
    where = "filter_logits"
    temperature = check_number(where, "temperature", temperature, low=0.0, low_open=True)
    top_k = check_int(where, "top_k", top_k, low=1, allow_none=True)
    top_p = check_number(where, "top_p", top_p, low=0.0, high=1.0, low_open=True,
                         allow_none=True)
    out = np.array(logits, dtype=np.float64) / temperature
    if top_k is not None and top_k < out.shape[-1]:
        kth = np.sort(out, axis=-1)[:, -top_k][:, None]
        out[out < kth] = -np.inf
    if top_p is not None and top_p < 1.0:
        order = np.argsort(out, axis=-1, kind="stable")          # ascending
        ranked = np.take_along_axis(out, order, axis=-1)
        probs = np.exp(ranked - ranked[:, -1:])
        cum = np.cumsum(probs / probs.sum(axis=-1, keepdims=True), axis=-1)
        remove = cum <= 1.0 - top_p
        remove[:, -1] = False
        np.put_along_axis(out, order, np.where(remove, -np.inf, ranked), axis=-1)
    return out


def sample_next(logits, rng):
    """One token id per row drawn from softmax(``logits``) (float64, -inf allowed)."""
    probs = np.exp(logits - logits.max(axis=-1, keepdims=True))
    cum = np.cumsum(probs, axis=-1)
    u = rng.random(len(logits))[:, None] * cum[:, -1:]
    return np.minimum((cum <= u).sum(axis=-1), logits.shape[-1] - 1).astype(np.int64)


def _check_generate(input_ids, attention_mask, max_new_tokens):
    where = "generate"
    ids = input_ids.data if isinstance(input_ids, lz.Variable) else input_ids
    if not isinstance(ids, cuda.array_types()) or ids.dtype.kind not in "iu":
        raise TypeError(f"{where}: input_ids must be an int array (batch, seq), got "
                        f"{describe(input_ids)}")
    ids = np.array(cuda.as_numpy(ids), dtype=np.int64, ndmin=2)
    if ids.ndim != 2 or ids.shape[1] == 0:
        raise ValueError(f"{where}: input_ids must be (batch, seq) with seq >= 1, got "
                         f"shape {ids.shape}")
    check_int(where, "max_new_tokens", max_new_tokens, low=0)
    if attention_mask is None:
        return ids, np.ones_like(ids)
    if isinstance(attention_mask, lz.Variable):
        attention_mask = attention_mask.data
    mask = np.array(cuda.as_numpy(attention_mask))
    if mask.shape != ids.shape:
        raise ValueError(f"{where}: attention_mask must have input_ids' shape {ids.shape}, "
                         f"got {mask.shape}")
    if not mask[:, -1].all():
        raise ValueError(f"{where}: pad on the left for generation (attention_mask's last "
                         f"column must be all 1)")
    return ids, mask.astype(np.int64)


def _keeps_last_logits(model):
    """Whether ``model.forward`` takes HF's ``logits_to_keep`` (then a step computes the
    vocabulary head for the last position only, not for the whole prompt)."""
    return "logits_to_keep" in inspect.signature(model.forward).parameters


class GenerationMixin:
    """``generate`` and ``loss`` for a causal language model (see the module docstring)."""

    def loss(self, input_ids, labels=None, attention_mask=None, ignore_index=-100):
        """HF's causal-LM loss: the mean cross entropy of predicting ``labels[:, 1:]`` from
        positions ``:-1`` (``labels`` default to ``input_ids``; ``ignore_index`` entries
        don't count)."""
        logits = self(input_ids, attention_mask=attention_mask)
        labels = input_ids if labels is None else labels
        labels = labels.data if isinstance(labels, lz.Variable) else labels
        vocab = logits.shape[-1]
        return F.cross_entropy(logits[:, :-1].reshape(-1, vocab), labels[:, 1:].reshape(-1),
                               ignore_index=ignore_index)

    def generate(self, input_ids, max_new_tokens=20, do_sample=False, temperature=1.0,
                 top_k=None, top_p=None, attention_mask=None, use_cache=True,
                 eos_token_id=None, pad_token_id=None):
        """``input_ids`` (B, T) followed by up to ``max_new_tokens`` new ids, (B, T + n).

        Greedy (argmax) unless ``do_sample``; sampling applies ``filter_logits`` and draws
        from LeZero's process generator (``lz.manual_seed``).  ``attention_mask`` marks
        left padding (positions then count from each row's first real token, as HF's
        ``generate`` does).  ``use_cache`` keeps a ``KVCache`` so each step feeds one
        token; without it every step reruns the whole sequence (same result, slower).
        Rows that produced ``eos_token_id`` continue with ``pad_token_id`` (default: the
        eos id); generation stops when all rows have."""
        ids, mask = _check_generate(input_ids, attention_mask, max_new_tokens)
        check_bool("generate", "do_sample", do_sample)
        check_bool("generate", "use_cache", use_cache)
        filter_logits(np.zeros((1, 1)), temperature, top_k, top_p)    # checks the knobs
        pad_token_id = eos_token_id if pad_token_id is None else pad_token_id
        xp = cuda.get_array_module(next(self.parameters()).data)
        rng = lz.get_rng()
        padded = not mask.all()
        cache = KVCache(ids.shape[1] + max_new_tokens) if use_cache else None
        last_only = {"logits_to_keep": 1} if _keeps_last_logits(self) else {}
        done = np.zeros(len(ids), dtype=bool)
        was_training = self.training
        self.eval()
        try:
            with lz.no_grad():
                for step in range(max_new_tokens):
                    start = ids.shape[1] - 1 if cache is not None and step else 0
                    positions = np.maximum(np.cumsum(mask, axis=1) - 1, 0)
                    positions[mask == 0] = 1                        # as HF's generate
                    logits = self(xp.asarray(ids[:, start:]),
                                  attention_mask=xp.asarray(mask) if padded else None,
                                  position_ids=xp.asarray(positions[:, start:]),
                                  past_key_values=cache, **last_only)
                    last = cuda.as_numpy(logits.data[:, -1]).astype(np.float64)
                    nxt = (sample_next(filter_logits(last, temperature, top_k, top_p), rng)
                           if do_sample else last.argmax(axis=-1))
                    if eos_token_id is not None:
                        nxt = np.where(done, pad_token_id, nxt)
                        done |= nxt == eos_token_id
                    ids = np.concatenate([ids, nxt[:, None].astype(np.int64)], axis=1)
                    mask = np.concatenate([mask, np.ones((len(ids), 1), np.int64)], axis=1)
                    if done.all():
                        break
        finally:
            self.train(was_training)
        return ids
