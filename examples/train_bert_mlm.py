"""Pretrain BERT (Hugging Face's BertForMaskedLM layout) with masked language modelling.

Data (``--data``):
* ``facts`` (default): generated sentences of a small world -- "the old cat chased the
  fish near the house ." -- where each animal has its own verb, food and place, and the
  adjective is random.  A masked word is recoverable from the words on *both* sides (the
  animal from its food and place, or the place from the animal), which is what a
  bidirectional encoder learns; masked adjectives are guesses (1 in 5);
* ``story``: characters of LeZero's shipped story (6 KB; in a minute of training BERT,
  like Hugging Face's in PyTorch, stays near the character frequencies there).

Inputs are corrupted as BERT's pretraining does: 15% of the tokens are chosen, of those
80% become [MASK], 10% a random token, 10% stay; the model predicts the originals at the
chosen positions.  Validation uses fixed corruptions of held-out data and reports the
accuracy and perplexity at the chosen positions; at the end the model fills in a
sentence.

    python examples/train_bert_mlm.py                     # about a minute on one core
    python examples/train_bert_mlm.py --data story --hidden 128 --layers 4 --epochs 30
"""
import numpy as np

import lezero as lz
from lezero import cuda
from lezero.nn.models import get_model
from lezero.nn.models.bert import mlm_mask

from _common import char_corpus, to_device, write_summary
from _lang import adamw, lm_args, lm_parser, train_steps

PAD, MASK = 0, 1                     # token t has id vocab.index(t) + 2

# The facts' world: each animal's verb, food and place (the adjective is free).
WORLD = {"cat": ("chased", "fish", "house"), "dog": ("found", "bone", "yard"),
         "cow": ("ate", "grass", "field"), "horse": ("wanted", "hay", "stable"),
         "bird": ("pecked", "seed", "tree"), "mouse": ("stole", "cheese", "hole"),
         "fox": ("hunted", "hen", "wood"), "bee": ("visited", "flower", "hive")}
ADJECTIVES = ("old", "young", "small", "big", "quiet")
PLACE_WORDS = ("near", "in", "behind")


def fact_sentences(n, rng):
    """``n`` generated sentences of 11 words each, as lists of words."""
    animals = sorted(WORLD)
    out = []
    for _ in range(n):
        a = animals[rng.integers(len(animals))]
        verb, food, place = WORLD[a]
        out.append(["the", ADJECTIVES[rng.integers(5)], a, verb, "the", food,
                    PLACE_WORDS[rng.integers(3)], "the", place, "."])
    return out


def load_data(args):
    """(train ids, held-out ids, vocab): for ``facts`` (N, 10) sentence rows, for
    ``story`` 1-D character ids; ids are shifted by 2 for [PAD] and [MASK]."""
    if args.data == "story":
        train, held, vocab = char_corpus(args.text)
        return train + 2, held + 2, vocab
    vocab = sorted({w for ws in WORLD.values() for w in ws} | set(WORLD) | set(ADJECTIVES)
                   | set(PLACE_WORDS) | {"the", "."})
    index = {w: i + 2 for i, w in enumerate(vocab)}
    rows = [[index[w] for w in s] for s in fact_sentences(4000, np.random.default_rng(7))]
    rows = np.array(rows, dtype=np.int64)
    return rows[:3600], rows[3600:], vocab


def corrupted(data, args, rng, vocab_size):
    """A batch masked BERT's way: (inputs, labels), labels -100 where not chosen.
    Sentence rows are drawn whole; a character stream gives random windows."""
    if data.ndim == 2:
        clean = data[rng.integers(0, len(data), args.batch_size)]
    else:
        starts = rng.integers(0, len(data) - args.block_size, args.batch_size)
        clean = np.stack([data[s:s + args.block_size] for s in starts])
    return mlm_mask(clean, MASK, vocab_size, rng, special_ids=(PAD, MASK))


def evaluate(model, val_ids, args, vocab_size, batches=20):
    """Accuracy and perplexity at the chosen positions of fixed corrupted windows."""
    rng = np.random.default_rng(12345)
    model.eval()
    hits = total = 0
    nll = []
    with lz.no_grad():
        for _ in range(batches):
            x, labels = corrupted(val_ids, args, rng, vocab_size)
            logits = cuda.as_numpy(model(to_device(args, x)).data)
            chosen = labels != -100
            hits += int((logits.argmax(-1)[chosen] == labels[chosen]).sum())
            total += int(chosen.sum())
            nll.append(float(model.loss(to_device(args, x), to_device(args, labels)).item())
                       * chosen.sum())
    return {"val_masked_acc": hits / total, "val_ppl": float(np.exp(sum(nll) / total))}


def fill_in(model, ids, positions, vocab, args):
    """The token row ``ids`` with ``positions`` masked, and the model's filling."""
    masked = np.array(ids)[None].copy()
    masked[0, positions] = MASK
    with lz.no_grad():
        guess = cuda.as_numpy(model.eval()(to_device(args, masked)).data).argmax(-1)[0]
    sep = " " if args.data == "facts" else ""
    show = lambda seq: sep.join("_" if i == MASK else vocab[i - 2] for i in seq)  # noqa
    return show(masked[0]), show(np.where(masked[0] == MASK, guess, masked[0]))


def main():
    p = lm_parser("bert_mlm", __doc__, epochs=20, lr=2e-3)
    p.add_argument("--data", choices=("facts", "story"), default="facts",
                   help="generated sentences of a small world, or the story's characters")
    p.add_argument("--hidden", type=int, default=64, help="hidden_size")
    p.add_argument("--layers", type=int, default=2, help="num_hidden_layers")
    p.add_argument("--heads", type=int, default=4, help="num_attention_heads")
    p.add_argument("--intermediate", type=int, default=256, help="intermediate_size")
    p.add_argument("--dropout", type=float, default=0.1, help="hidden and attention dropout")
    p.add_argument("--init-std", type=float, default=0.02, help="initializer_range")
    args = lm_args(p)
    train_ids, val_ids, vocab = load_data(args)
    V = len(vocab) + 2
    if args.data == "facts":
        args.block_size = train_ids.shape[1]
    model = get_model("bert", vocab_size=V, hidden_size=args.hidden,
                      num_hidden_layers=args.layers, num_attention_heads=args.heads,
                      intermediate_size=args.intermediate, pad_token_id=PAD,
                      max_position_embeddings=args.block_size,
                      hidden_dropout_prob=args.dropout,
                      attention_probs_dropout_prob=args.dropout,
                      initializer_range=args.init_std)
    opt, sched = adamw(model, args, args.epochs * args.steps)
    print(f"BERT: {model.num_parameters():,} parameters, {V} tokens "
          f"({len(vocab)} {'words' if args.data == 'facts' else 'characters'}, [PAD], "
          f"[MASK])")

    def step(rng):
        x, labels = to_device(args, *corrupted(train_ids, args, rng, V))
        return model.loss(x, labels), {}
    import time
    from _common import fit
    t0 = time.perf_counter()
    history = fit(args, {"model": model}, {"optimizer": opt},
                  lambda epoch: train_steps(args, model, opt, sched, step, epoch, "bert"),
                  lambda: evaluate(model, val_ids, args, V), {"scheduler": sched})
    final = history[-1]
    if args.data == "facts":
        row, positions = val_ids[0], [2, 8]            # the animal and the place
    else:
        row, positions = val_ids[:60], list(range(3, 60, 6))
    masked, filled = fill_in(model, row, positions, vocab, args)
    print(f"masked: {masked!r}\nfilled: {filled!r}")
    print(f"held-out masked-token accuracy {final['val_masked_acc']:.3f}, perplexity "
          f"{final['val_ppl']:.2f} at the masked positions")
    data = ("generated sentences (8 animals, their verbs, foods, places)"
            if args.data == "facts" else "shipped story (characters)")
    write_summary(args, "bert", "masked language model", data,
                  "val_masked_acc", final["val_masked_acc"], time.perf_counter() - t0,
                  val_ppl=final["val_ppl"], parameters=model.num_parameters())


if __name__ == "__main__":
    main()
