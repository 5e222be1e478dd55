"""Step 40: a tiny GPT learns to write like a short story.

A GPT is a stack of Transformer blocks that reads characters and predicts, at every
position, the next one.  Each block lets a position gather information from earlier
positions (causal self-attention: queries meet keys, softmax weights average the values,
a mask hides the future) and then transforms it (a two-layer MLP); layer norms before
each part and residual connections keep a deep stack trainable.  Training is nothing but
cross entropy on next-character prediction over random windows of the text; sampling
feeds the model's own guesses back in.  The text is the short story shipped with LeZero.
Run: python steps/step40.py
"""
import math

import numpy as np

import lezero as lz
import lezero.functions as F
from lezero import optim
from lezero.data.datasets import load_corpus
from lezero.nn.models import GPT

lz.manual_seed(0)
text = load_corpus()
vocab = sorted(set(text))
stoi = {c: i for i, c in enumerate(vocab)}
ids = np.array([stoi[c] for c in text], dtype=np.int64)
print(f"corpus: {len(text):,} characters, vocabulary of {len(vocab)}")

BLOCK = 32
model = GPT(vocab_size=len(vocab), block_size=BLOCK, n_layer=2, n_head=4, d_model=64)
print(f"GPT: {model.config.n_layer} blocks, {model.config.n_head} heads, d_model "
      f"{model.config.d_model}, {model.num_parameters():,} parameters")


def decode(seq):
    return "".join(vocab[int(i)] for i in seq)


def attention_weights(prompt, head=0):
    """Block 0's attention weights for one head, recomputed step by step: row t is how
    position t spreads its attention over positions 0..t (the future gets zero)."""
    block, T = model.transformer["h"][0], prompt.shape[1]
    hd = model.config.d_model // model.config.n_head
    with lz.no_grad():
        h = block.ln_1(model.transformer["wte"](prompt) + model.transformer["wpe"](np.arange(T)))
        q, k, _ = F.split(block.attn.c_attn(h), 3, axis=-1)
        cols = slice(head * hd, (head + 1) * hd)
        scores = (q.data[0, :, cols] @ k.data[0, :, cols].T) / math.sqrt(hd)
        scores[np.triu_indices(T, 1)] = -np.inf
        return F.softmax(scores, axis=-1).data


prompt = ids[None, :6]
weights = attention_weights(prompt)
print(f"attention of head 0 over {decode(prompt[0])!r} (untrained, nearly uniform):")
print(np.array2string(weights, precision=2, suppress_small=True))
assert np.allclose(np.triu(weights, 1), 0) and np.allclose(weights.sum(axis=1), 1)

# Causality of the whole model: changing the last character leaves earlier predictions.
x = ids[None, :BLOCK]
changed = x.copy()
changed[0, -1] = (changed[0, -1] + 1) % len(vocab)
with lz.no_grad():
    same = np.allclose(model(x).data[0, :-1], model(changed).data[0, :-1], atol=1e-6)
print(f"predictions at positions < t ignore the character at t: {same}")
assert same

print("sample before training:", repr(decode(model.generate(ids[None, :10], 60)[0])))
print(f"a uniform guess scores cross entropy log({len(vocab)}) = {math.log(len(vocab)):.3f}")

opt = optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
rng = np.random.default_rng(0)
steps, batch = 300, 16
sched = optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps, eta_min=3e-4)
recent = []                     # one batch's loss is noisy: show the mean of the last 50
print("mean training loss over each 50 steps (it falls from the uniform guess's):")
for step in range(1, steps + 1):
    starts = rng.integers(0, len(ids) - BLOCK - 1, batch)
    xb = np.stack([ids[s:s + BLOCK] for s in starts])
    yb = np.stack([ids[s + 1:s + BLOCK + 1] for s in starts])
    loss = model.loss(xb, yb)
    opt.zero_grad()
    loss.backward()
    opt.step()
    sched.step()
    recent.append(loss.item())
    if step % 50 == 0:
        print(f"  steps {step - 49:3d}-{step:3d}  loss {np.mean(recent):.3f}")
        recent = []
assert loss.item() < 2.3
print("attention of head 0 after training (no longer uniform):")
print(np.array2string(attention_weights(prompt), precision=2, suppress_small=True))

lz.manual_seed(1)
sample = decode(model.generate(ids[None, :10], 200, temperature=0.8, top_k=8)[0])
print("sample after training:\n" + sample)
