"""Tensor-parallel training of GPT-mini (Megatron-LM's split) on LeZero's story.

Every rank holds 1/ranks of every weight matrix: attention split by heads, the MLP's
hidden layer split, the vocabulary split in the embedding, the head and the loss (the
full logits are never formed).  Each step prints nothing; at the end the script prints
the communication of one step layer by layer, writes a sharded checkpoint (one file per
rank and a manifest) and checks that the dense model gathered from it gives the same
validation loss as the sharded one.

    mpiexec -n 2 python examples/train_tp_gpt.py
    mpiexec -n 4 python examples/train_tp_gpt.py --heads 4 --d-model 128
    python examples/train_tp_gpt.py --smoke          # one process, a few steps
"""
import os

from _parallel3d import (global_batch, gpt_flags, gpt_setup, lm_eval, parser, run, say,
                         setup, train_steps)

import lezero as lz  # noqa: E402
from lezero import optim, parallel  # noqa: E402
from lezero.nn.models import GPT  # noqa: E402


def main():
    p = gpt_flags(parser("tp_gpt", __doc__))
    args, world = setup(p)
    config, train_ids, val_ids, vocab = gpt_setup(args)
    if config.n_head % world.size:
        p.error(f"--heads {config.n_head} must divide by the {world.size} ranks")
    model = parallel.ParallelGPT(config, comm=world)
    opt = optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0)
    mine = sum(q.size for q in model.parameters())
    say(world, f"GPT-mini tensor parallel over {world.size} rank(s): vocabulary {len(vocab)}"
               f" (padded to {model.transformer['wte'].padded_num_embeddings}), "
               f"{mine:,} parameters on each rank")

    def step(epoch, i):
        x, y = global_batch(train_ids, args, epoch, i)
        opt.zero_grad()
        loss = model.loss(x, y)
        loss.backward()
        opt.step()
        return float(loss.data)

    def train_epoch(epoch):
        loss = train_steps(args, world, epoch, step)
        val = lm_eval(lambda x, y: float(model.loss(x, y).data), val_ids, args, world)
        return {"loss": loss, "val_loss": val}

    history = run(args, world, train_epoch, lambda h: dict(
        model="tp_gpt", task="character language model", data="LeZero story",
        metric="val_loss", value=h[-1]["val_loss"]))

    x, y = global_batch(train_ids, args, 0, 0)
    with parallel.CommAccounting(model) as acc:
        model.loss(x, y).backward()
    model.zero_grad()
    say(world, "communication of one training step, per layer (this rank):\n" + acc.table())
    ckpt = os.path.join(args.out, "sharded")
    parallel.save_sharded_checkpoint(ckpt, model, extra={"history": history}, comm=world)
    if world.rank == 0:
        dense = GPT(config)
        dense.load_state_dict(parallel.consolidate_checkpoint(ckpt))
        with lz.no_grad():
            check = lm_eval(lambda a, b: float(dense.loss(a, b).data), val_ids, args, world)
        print(f"sharded checkpoint in {ckpt}; the dense model gathered from it: val_loss "
              f"{check:.4f} (sharded model {history[-1]['val_loss']:.4f})")


if __name__ == "__main__":
    main()
