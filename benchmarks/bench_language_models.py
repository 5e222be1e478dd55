"""The Hugging Face ports against Hugging Face's own models (PyTorch CPU), same weights,
same thread count, one process, alternating rounds.

    BENCH_THREADS=1 BENCH_CLOCK=cpu python benchmarks/bench_language_models.py

Cases (small configs: hidden 128, 4 layers, 4 heads, vocabulary 512):
* a training step (forward, loss, backward) of BERT (masked LM, batch 8 x 64),
  GPT-2 and LLaMA (GQA with 2 key/value heads; causal LM, batch 8 x 64);
* greedy generation of 48 tokens after a 16-token prompt (batch 1), GPT-2 and LLaMA,
  with the KV cache and without (LeZero ``generate(use_cache=...)``, HF
  ``generate(use_cache=...)``).  The tokens are checked to agree before timing.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import interleaved_best_median, limit_threads, report, set_threads  # noqa: E402
from _record import run_main  # noqa: E402

SIZE = dict(hidden=128, layers=4, heads=4, vocab=512)
CONFIGS = {
    "bert": ("BertConfig", "BertForMaskedLM", dict(
        vocab_size=SIZE["vocab"], hidden_size=SIZE["hidden"], num_hidden_layers=SIZE["layers"],
        num_attention_heads=SIZE["heads"], intermediate_size=4 * SIZE["hidden"],
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)),
    "gpt2": ("GPT2Config", "GPT2LMHeadModel", dict(
        vocab_size=SIZE["vocab"], n_embd=SIZE["hidden"], n_layer=SIZE["layers"],
        n_head=SIZE["heads"], n_positions=128, resid_pdrop=0.0, embd_pdrop=0.0,
        attn_pdrop=0.0, bos_token_id=0, eos_token_id=0)),
    "llama": ("LlamaConfig", "LlamaForCausalLM", dict(
        vocab_size=SIZE["vocab"], hidden_size=SIZE["hidden"], num_hidden_layers=SIZE["layers"],
        num_attention_heads=SIZE["heads"], num_key_value_heads=2,
        intermediate_size=344, max_position_embeddings=128, bos_token_id=0, eos_token_id=0)),
}


def pair(name):
    """(lezero model, HF model) in eval mode with HF's random weights."""
    import torch
    from lezero.nn import models
    from lezero.testing.oracles import import_transformers
    tr = import_transformers()
    config_cls, model_cls, kw = CONFIGS[name]
    torch.manual_seed(0)
    cfg = getattr(tr, config_cls)(attn_implementation="eager", **kw)
    ref = getattr(tr, model_cls)(cfg).eval()
    ours = models.get_model(name, **cfg.to_dict())
    ours.load_state_dict({k: v.detach().numpy() for k, v in ref.state_dict().items()})
    return ours.eval(), ref


def step_fns(name, ours, ref):
    """One forward + loss + backward each, on the same batch."""
    import torch
    rng = np.random.default_rng(0)
    ids = rng.integers(1, SIZE["vocab"], (8, 64))
    labels = ids.copy()
    if name == "bert":
        labels[rng.random(ids.shape) > 0.15] = -100
    t_ids, t_labels = torch.as_tensor(ids), torch.as_tensor(labels)

    def lezero_step():
        ours.zero_grad()
        ours.loss(ids, labels).backward()

    def torch_step():
        ref.zero_grad()
        ref(t_ids, labels=t_labels).loss.backward()
    return lezero_step, torch_step


def generate_fns(ours, ref, use_cache):
    import torch
    prompt = np.random.default_rng(1).integers(1, SIZE["vocab"], (1, 16))
    t_prompt = torch.as_tensor(prompt)
    mine = ours.generate(prompt, 48, use_cache=use_cache)
    with torch.no_grad():
        theirs = ref.generate(t_prompt, max_new_tokens=48, min_new_tokens=48, do_sample=False,
                              use_cache=use_cache, pad_token_id=0).numpy()
    assert np.array_equal(mine, theirs), "greedy tokens differ from HF's"

    def torch_generate():
        with torch.no_grad():
            ref.generate(t_prompt, max_new_tokens=48, min_new_tokens=48, do_sample=False,
                         use_cache=use_cache, pad_token_id=0)
    return (lambda: ours.generate(prompt, 48, use_cache=use_cache)), torch_generate


def main():
    threads = set_threads()
    rows = []
    with limit_threads(threads):
        for name in ("bert", "gpt2", "llama"):
            ours, ref = pair(name)
            cases = [("train step", step_fns(name, ours, ref))]
            if name != "bert":
                cases += [("generate 48, KV cache", generate_fns(ours, ref, True)),
                          ("generate 48, no cache", generate_fns(ours, ref, False))]
            for label, (mine, theirs) in cases:
                (lz_t, _), (pt_t, _) = interleaved_best_median([mine, theirs], rounds=5,
                                                               warmup=1)
                rows.append((f"{name}: {label}", lz_t, pt_t, None))
    report(f"language models vs Hugging Face transformers, {threads} thread(s), clock "
           f"{os.environ.get('BENCH_CLOCK', 'wall')}", rows)


if __name__ == "__main__":
    run_main(main)
