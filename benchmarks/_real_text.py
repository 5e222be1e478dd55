"""bench_real's language rows: Hugging Face ``transformers`` models (random weights from
their default configs: BERT-base, GPT-2 small; nothing downloads) beside LeZero's ports
loaded with the same state_dict.  Builders take ``{"batch": n, "seq": tokens}`` (and
``"new"`` tokens for generation) and return ``(lezero_fn, reference_fn)``.

``transformers`` keeps its default attention implementation (what a user gets);
``layers`` in a shape shrinks both models alike (the quick test uses it).
"""
import numpy as np

import lezero as lz
from lezero.nn import models
from lezero.testing.oracles import import_transformers


def hf_pair(config_cls, model_cls, name, layers=None):
    """(ours, reference): the reference from its default config (``layers`` overrides
    the depth), ours from the same config with its state_dict."""
    import torch
    tr = import_transformers()
    torch.manual_seed(0)
    cfg = getattr(tr, config_cls)()
    if layers:
        setattr(cfg, "n_layer" if name == "gpt2" else "num_hidden_layers", layers)
    ref = getattr(tr, model_cls)(cfg)
    config = {k: v for k, v in cfg.to_dict().items() if k != "attn_implementation"}
    ours = models.get_model(name, **config)
    ours.load_state_dict({k: v.detach().numpy().copy() for k, v in ref.state_dict().items()},
                         strict=True)
    return ours, ref


def token_ids(shape, vocab, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(1, vocab, (shape["batch"], shape["seq"])).astype(np.int64)


def bert_inference(shape):
    """BertForMaskedLM logits, eval mode, no gradients."""
    import torch
    ours, ref = hf_pair("BertConfig", "BertForMaskedLM", "bert", shape.get("layers"))
    ours.eval()
    ref.eval()
    ids = token_ids(shape, ref.config.vocab_size)
    tids = torch.from_numpy(ids)

    def lezero_fn():
        with lz.no_grad():
            return ours(ids)

    def torch_fn():
        with torch.no_grad():
            return ref(tids).logits
    return lezero_fn, torch_fn


def gpt2_train(shape):
    """One AdamW step of GPT2LMHeadModel on its causal-LM loss (train mode, dropout on)."""
    import torch
    ours, ref = hf_pair("GPT2Config", "GPT2LMHeadModel", "gpt2", shape.get("layers"))
    ours.train()
    ref.train()
    ids = token_ids(shape, ref.config.vocab_size)
    tids = torch.from_numpy(ids)
    opt = lz.optim.AdamW(ours.parameters(), lr=1e-4)
    topt = torch.optim.AdamW(ref.parameters(), lr=1e-4)

    def lezero_fn():
        loss = ours.loss(ids)
        opt.zero_grad()
        loss.backward()
        opt.step()

    def torch_fn():
        loss = ref(tids, labels=tids).loss
        topt.zero_grad()
        loss.backward()
        topt.step()
    return lezero_fn, torch_fn


def gpt2_generate(shape):
    """Greedy generation of ``shape["new"]`` tokens after a ``seq``-token prompt, with the
    KV cache on both sides; no end-of-text stop (both generate every token)."""
    import torch
    ours, ref = hf_pair("GPT2Config", "GPT2LMHeadModel", "gpt2", shape.get("layers"))
    ours.eval()
    ref.eval()
    ids = token_ids(shape, ref.config.vocab_size)
    tids = torch.from_numpy(ids)
    new = shape["new"]
    ref.generation_config.pad_token_id = ref.config.eos_token_id
    ref.generation_config.eos_token_id = None

    def lezero_fn():
        out = ours.generate(ids, max_new_tokens=new, eos_token_id=None)
        assert out.shape[1] == ids.shape[1] + new
        return out

    def torch_fn():
        with torch.no_grad():
            return ref.generate(tids, attention_mask=torch.ones_like(tids), do_sample=False,
                                max_new_tokens=new)
    return lezero_fn, torch_fn
