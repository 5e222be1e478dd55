"""Train GPT-2 (Hugging Face's GPT2LMHeadModel layout) on characters, then sample.

The model is ``get_model("gpt2", ...)`` with GPT2Config's field names, so a HF
checkpoint's state_dict loads into it as-is; here it starts from random weights and
learns LeZero's shipped story one character at a time.  At the end it samples with
temperature, top-k and top-p (nucleus), once with the KV cache and once without: the
text is the same, the cached run feeds one token per step.

    python examples/train_gpt2.py                         # about a minute on one core
    python examples/train_gpt2.py --n-embd 128 --n-layer 4 --epochs 20 --text input.txt
"""
from lezero.nn.models import get_model

from _lang import lm_args, lm_parser, run_causal_lm


def main():
    p = lm_parser("gpt2", __doc__, epochs=8, lr=1e-2)
    p.add_argument("--n-embd", type=int, default=64, help="embedding width")
    p.add_argument("--n-layer", type=int, default=2, help="Transformer blocks")
    p.add_argument("--n-head", type=int, default=4, help="attention heads")
    p.add_argument("--dropout", type=float, default=0.0,
                   help="resid_pdrop = embd_pdrop = attn_pdrop")
    args = lm_args(p)
    from _common import char_corpus
    vocab = char_corpus(args.text)[2]
    model = get_model("gpt2", vocab_size=len(vocab), n_positions=args.block_size + args.sample
                      + 16, n_embd=args.n_embd, n_layer=args.n_layer, n_head=args.n_head,
                      resid_pdrop=args.dropout, embd_pdrop=args.dropout,
                      attn_pdrop=args.dropout)
    run_causal_lm(args, "gpt2", model)


if __name__ == "__main__":
    main()
