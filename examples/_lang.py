"""What the language-model examples share: a progress bar, AdamW with warm-up and cosine
decay, character windows of the shipped story, and the whole causal-LM script that
GPT-2, LLaMA and the MoE Transformer run (train, perplexity, sampling with and without
the KV cache).
"""
import math
import os
import time

import numpy as np

import lezero as lz
from lezero import optim

from _common import (SMOKE_BATCHES, bar, char_corpus, check_args, fit, make_parser, mean,
                     smoke_limit, to_device, write_json, write_summary)


def progress(total, desc, args=None):
    """A bar over an epoch's steps (on a terminal only: ``_common.bar``); with ``args``
    of a --smoke run the total is cut as ``smoke_limit`` cuts the loop."""
    if args is not None and args.smoke:
        total = min(total, SMOKE_BATCHES)
    return bar(total=total, desc=desc, unit="step", leave=False)


def adamw(model, args, total_steps, warmup=20, betas=(0.9, 0.95)):
    """AdamW decaying matrices only (not biases or norm scales), with linear warm-up and
    cosine decay to 10% of --lr over ``total_steps``; returns (optimizer, scheduler)."""
    decay = [p for p in model.parameters() if p.ndim >= 2]
    rest = [p for p in model.parameters() if p.ndim < 2]
    opt = optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                       {"params": rest, "weight_decay": 0.0}], lr=args.lr, betas=betas)

    def schedule(step):
        if step < warmup:
            return (step + 1) / warmup
        done = min(1.0, (step - warmup) / max(1, total_steps - warmup))
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * done))
    return opt, optim.lr_scheduler.LambdaLR(opt, schedule)


def windows(ids, block, batch, rng):
    """``batch`` random windows of ``block + 1`` ids: (inputs, next-id targets)."""
    starts = rng.integers(0, len(ids) - block - 1, batch)
    chunk = np.stack([ids[s:s + block + 1] for s in starts])
    return chunk[:, :-1], chunk[:, 1:]


def optimize(args, opt, loss_of, items, total, desc, clip=None, sched=None):
    """One optimizer step per item of ``items`` (with a progress bar of ``total``):
    ``loss_of(item)`` returns the loss Variable, or (loss, dict of numbers to average).
    ``clip``: parameters whose gradient norm is clipped to 1.  Returns the means."""
    losses, extras = [], {}
    steps = progress(total, desc, args)
    for item in items:
        out = loss_of(item)
        loss, extra = out if isinstance(out, tuple) else (out, {})
        opt.zero_grad()
        loss.backward()
        if clip is not None:
            optim.clip_grad_norm_(clip, 1.0)
        opt.step()
        if sched is not None:
            sched.step()
        losses.append(loss.item())
        for k, v in extra.items():
            extras.setdefault(k, []).append(v)
        steps.update()
        steps.set_postfix(loss=f"{losses[-1]:.3f}")
    steps.close()
    return {"loss": mean(losses), **{k: mean(v) for k, v in extras.items()}}


def train_steps(args, model, opt, sched, step_loss, epoch, desc):
    """An epoch of ``args.steps`` clipped steps; ``step_loss(rng)`` as ``loss_of``."""
    rng = np.random.default_rng([args.seed, epoch])
    metrics = optimize(args, opt, lambda _: step_loss(rng), smoke_limit(range(args.steps)),
                       args.steps, f"{desc} epoch {epoch + 1}", list(model.parameters()),
                       sched)
    return {**metrics, "lr": sched.get_last_lr()[0]}


def lm_parser(name, doc, epochs, lr=3e-3, sampling=True):
    """The flags of a character-LM example (``sampling``: the generation flags too)."""
    p = make_parser(name, doc, epochs=epochs, batch_size=16, lr=lr)
    p.add_argument("--text", help="a UTF-8 text file (default: LeZero's shipped story)")
    p.add_argument("--steps", type=int, default=40, help="optimizer steps per epoch")
    p.add_argument("--block-size", type=int, default=64, help="context length (characters)")
    p.add_argument("--weight-decay", type=float, default=0.1, help="AdamW decay of matrices")
    if not sampling:
        return p
    p.add_argument("--sample", type=int, default=120, help="characters to generate")
    p.add_argument("--temperature", type=float, default=0.8, help="sampling temperature")
    p.add_argument("--top-k", type=int, default=20, help="sample among the k likeliest")
    p.add_argument("--top-p", type=float, default=0.95, help="nucleus: the smallest set "
                   "of characters holding this much probability")
    return p


def val_perplexity(args, val_ids, mean_ce, batches=4):
    """exp(mean next-character cross entropy) over fixed validation windows."""
    rng = np.random.default_rng(12345)
    with lz.no_grad():
        ces = [mean_ce(*to_device(args, *windows(val_ids, args.block_size, 16, rng)))
               for _ in range(batches)]
    return float(np.exp(mean(ces)))


def timed_generate(model, prompt, args, use_cache):
    """(ids, seconds) of sampling ``args.sample`` characters, seeded identically."""
    lz.manual_seed(args.seed)
    t0 = time.perf_counter()
    out = model.generate(prompt, args.sample, do_sample=True, temperature=args.temperature,
                         top_k=args.top_k, top_p=args.top_p, use_cache=use_cache)
    return out, time.perf_counter() - t0


def next_token_ce(model):
    """``mean_ce(x, y)``: the mean cross entropy of ``model(x)`` against targets y."""
    import lezero.functions as F

    def mean_ce(x, y):
        logits = model(x)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
    return mean_ce


def run_causal_lm(args, name, model, mean_ce=None, step_loss=None, extra_summary=None,
                  generate=True):
    """Train ``model`` on characters of the story, report the validation perplexity,
    sample with and without the KV cache (a GenerationMixin model), write the summary.
    ``mean_ce(x, y)`` gives the validation loss (default ``next_token_ce``);
    ``step_loss(x, y)`` the training loss and extra numbers (default: mean_ce);
    ``extra_summary``: more summary fields, or a function giving them after training."""
    mean_ce = mean_ce or next_token_ce(model)
    train_ids, val_ids, vocab = char_corpus(args.text)
    total = args.epochs * args.steps
    opt, sched = adamw(model, args, total)
    print(f"{name}: {model.num_parameters():,} parameters, vocabulary {len(vocab)}, "
          f"{len(train_ids)} training characters")

    def batch(rng):
        return to_device(args, *windows(train_ids, args.block_size, args.batch_size, rng))
    step = (lambda rng: step_loss(*batch(rng))) if step_loss else \
        (lambda rng: (mean_ce(*batch(rng)), {}))
    t0 = time.perf_counter()
    fit(args, {"model": model}, {"optimizer": opt},
        lambda epoch: train_steps(args, model, opt, sched, step, epoch, name),
        lambda: {"val_ppl": val_perplexity(args, val_ids, mean_ce)}, {"scheduler": sched})
    seconds = time.perf_counter() - t0
    ppl = val_perplexity(args, val_ids, mean_ce)
    write_json(os.path.join(args.out, "vocab.json"), vocab)
    print(f"validation perplexity {ppl:.2f} per character (uniform: {len(vocab)})")
    extra = dict((extra_summary() if callable(extra_summary) else extra_summary) or {})
    if generate:
        extra.update(sample_both_ways(args, model, train_ids, vocab))
    write_summary(args, name, "character language model", "shipped story (characters)",
                  "val_ppl", ppl, seconds, parameters=model.num_parameters(), **extra)
    return ppl


def sample_both_ways(args, model, train_ids, vocab):
    """Sample from a prompt with and without the KV cache (same seed); print the text
    and both times; return the numbers for the summary."""
    prompt = to_device(args, train_ids[None, :16])
    cached, t_cached = timed_generate(model, prompt, args, True)
    plain, t_plain = timed_generate(model, prompt, args, False)
    same = bool(np.array_equal(cached, plain))
    print("sample:", repr("".join(vocab[int(i)] for i in cached[0])))
    print(f"generating {args.sample} characters: {t_cached:.2f} s with the KV cache, "
          f"{t_plain:.2f} s without (the same text: {same})")
    return {"kv_cache_speedup": round(t_plain / max(t_cached, 1e-9), 2),
            "cached_equals_uncached": same}


def lm_args(parser):
    """Parse and check the flags of a causal-LM example; seeds LeZero."""
    args = check_args(parser, parser.parse_args())
    if args.smoke and hasattr(args, "sample"):
        args.sample = min(args.sample, 12)          # the uncached run is the slow one
    lz.manual_seed(args.seed)
    return args
