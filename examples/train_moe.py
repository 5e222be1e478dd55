"""Train a Transformer language model whose feed-forward layers are mixtures of experts.

Each block's FFN is ``nn.MixtureOfExperts``: a router sends every character to its
``--top-k`` of ``--experts`` expert networks; the Switch Transformer's load-balancing
loss (weighted by ``--aux-coef``) keeps the experts evenly used, and ``--capacity``
(optional) caps each expert's share, dropping the overflow (the token keeps its
residual).  Trains on LeZero's shipped story; reports the validation perplexity, how
the characters spread over the experts, and the balancing loss (1.0 = perfectly even).

    python examples/train_moe.py                          # about a minute on one core
    python examples/train_moe.py --experts 8 --top-k 1 --capacity 1.25
"""
import numpy as np

from lezero.nn.models import get_model

from _common import char_corpus
from _lang import lm_args, lm_parser, run_causal_lm


def main():
    p = lm_parser("moe", __doc__, epochs=6, sampling=False)
    p.add_argument("--d-model", type=int, default=64, help="embedding width")
    p.add_argument("--layers", type=int, default=2, help="Transformer blocks")
    p.add_argument("--heads", type=int, default=4, help="attention heads")
    p.add_argument("--d-ff", type=int, default=128, help="hidden size of each expert")
    p.add_argument("--experts", type=int, default=4, help="experts per MoE layer")
    p.add_argument("--top-k", type=int, default=2,
                   help="experts per token (1 = Switch routing)")
    p.add_argument("--capacity", type=float, default=None,
                   help="capacity factor (None: no token is dropped)")
    p.add_argument("--aux-coef", type=float, default=0.01,
                   help="weight of the load-balancing loss")
    args = lm_args(p)
    vocab = char_corpus(args.text)[2]
    model = get_model("moe_transformer", vocab_size=len(vocab), block_size=args.block_size,
                      d_model=args.d_model, n_layer=args.layers, n_head=args.heads,
                      d_ff=args.d_ff, num_experts=args.experts, top_k=args.top_k,
                      capacity_factor=args.capacity, aux_loss_coef=args.aux_coef)

    def step_loss(x, y):
        total, ce = model.loss(x, y)
        return total, {"aux": model.aux_loss().item(),
                       "dropped": np.mean([b.moe.last_routing["dropped"]
                                           for b in model.blocks])}

    def mean_ce(x, y):
        return model.loss(x, y)[1]

    run_causal_lm(args, "moe_transformer", model, mean_ce, step_loss, generate=False,
                  extra_summary=lambda: routing_summary(model, args))


def routing_summary(model, args):
    """Print and return how the last batch's tokens spread over the experts."""
    loads = [b.moe.last_routing["load"] for b in model.blocks]
    for i, load in enumerate(loads):
        print(f"  layer {i}: share of assignments per expert "
              f"{' '.join(f'{v:.2f}' for v in load)}")
    return {"aux_loss": round(float(model.aux_loss().item()), 4),
            "max_expert_share": round(float(np.max(loads)), 3),
            "experts": args.experts, "top_k": args.top_k}


if __name__ == "__main__":
    main()
