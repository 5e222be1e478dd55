"""Train a LLaMA-style decoder (Hugging Face's LlamaForCausalLM layout) on characters.

RMSNorm, rotary position embeddings, a SwiGLU feed-forward network and grouped-query
attention (``--kv-heads`` key/value heads shared by ``--heads`` query heads); the config
takes LlamaConfig's field names, so HF checkpoints load as-is.  Trains on LeZero's
shipped story, reports the validation perplexity, then samples with and without the KV
cache (the same text; the cache holds only the ``--kv-heads`` heads).

    python examples/train_llama.py                        # about a minute on one core
    python examples/train_llama.py --hidden 128 --layers 4 --heads 8 --kv-heads 2
"""
from lezero.nn.models import get_model

from _lang import lm_args, lm_parser, run_causal_lm


def main():
    p = lm_parser("llama", __doc__, epochs=4)
    p.add_argument("--hidden", type=int, default=64, help="hidden_size")
    p.add_argument("--intermediate", type=int, default=172, help="intermediate_size (SwiGLU)")
    p.add_argument("--layers", type=int, default=2, help="num_hidden_layers")
    p.add_argument("--heads", type=int, default=4, help="num_attention_heads")
    p.add_argument("--kv-heads", type=int, default=2, help="num_key_value_heads")
    p.add_argument("--rope-theta", type=float, default=10000.0, help="rotary base")
    args = lm_args(p)
    from _common import char_corpus
    vocab = char_corpus(args.text)[2]
    model = get_model("llama", vocab_size=len(vocab), hidden_size=args.hidden,
                      intermediate_size=args.intermediate, num_hidden_layers=args.layers,
                      num_attention_heads=args.heads, num_key_value_heads=args.kv_heads,
                      max_position_embeddings=args.block_size, rope_theta=args.rope_theta)
    run_causal_lm(args, "llama", model)


if __name__ == "__main__":
    main()
