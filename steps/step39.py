"""Step 39: a trained model's weights: save them, load them, reuse them for a new task.

A model's ``state_dict()`` is an ordered dict of arrays named by where they live
(``features.0.weight``, ``classifier.4.bias``, batch norm's ``running_mean``): the
weights alone, enough to use the model.  ``model.save(path)`` writes it atomically and
``model.load(path)`` reads it into a model built the same way; ``load_state_dict`` says
what is missing, what is unexpected and which shapes disagree.  Fine-tuning reuses every
weight but the head of a model trained for another task.  (Resuming an interrupted
*training run* needs more than the weights -- optimizer, scheduler, random generator:
that is step 36.)
Run: python steps/step39.py
"""
import os
import shutil
import tempfile

import numpy as np

import lezero as lz
import lezero.functions as F
from lezero import optim
from lezero.data.datasets import Digits
from lezero.nn import models

train, test = Digits(train=True), Digits(train=False)
x, t = train.data[:, None], train.targets
workdir = tempfile.mkdtemp()


def new_run(seed=0):
    lz.manual_seed(seed)
    model = models.LeNet5(input_size=8)
    opt = optim.Adam(model.parameters(), lr=5e-3)
    sched = optim.lr_scheduler.StepLR(opt, step_size=40, gamma=0.5)
    return model, opt, sched


def train_epochs(model, opt, sched, first, last, batch=64):
    """Epochs [first, last); each epoch's order comes from the epoch number alone."""
    model.train()
    for epoch in range(first, last):
        order = np.random.default_rng(epoch).permutation(len(x))
        for i in range(0, len(x), batch):
            idx = order[i:i + batch]
            loss = F.cross_entropy(model(x[idx]), t[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
    return loss.item()


def accuracy(model):
    model.eval()
    with lz.no_grad():
        return float((model(test.data[:, None]).data.argmax(axis=1) == test.targets).mean())


# 1. Train, save the weights, load them into a fresh model.
model, opt, sched = new_run()
train_epochs(model, opt, sched, 0, 6)
acc = accuracy(model)
path = os.path.join(workdir, "lenet.safetensors")
model.save(path)
print(f"trained 6 epochs: test accuracy {acc:.3f}; saved {os.path.getsize(path):,} bytes")
keys = list(model.state_dict())
print(f"state_dict: {len(keys)} arrays, e.g. {keys[:3]} ... {keys[-1]}")

fresh = models.LeNet5(input_size=8)
fresh.load(path)
assert accuracy(fresh) == acc
print(f"reloaded into a fresh model: test accuracy {accuracy(fresh):.3f}")

# 2. What load_state_dict reports when the model and the file disagree.
state = lz.load(path)
partial = {k: v for k, v in state.items() if not k.startswith("classifier.4")}
result = fresh.load_state_dict(partial, strict=False)
print(f"strict=False without the head: missing {result.missing_keys}")
try:
    fresh.load_state_dict(partial)                        # strict by default
except KeyError as e:
    print("strict=True refuses:", str(e)[:90], "...")
try:
    models.LeNet5(num_classes=5, input_size=8).load_state_dict(state)
except ValueError as e:
    print("a 5-class model refuses the 10-class head:", e)

# 3. Fine-tuning: keep the trained features, start a new 5-class head.
five = models.LeNet5(num_classes=5, input_size=8)
reuse = {k: v for k, v in lz.load(path).items() if not k.startswith("classifier.4")}
missing, unexpected = five.load_state_dict(reuse, strict=False)
print(f"fine-tuning model: reused {len(reuse)} arrays; new {missing}; unexpected "
      f"{unexpected}")
assert missing == ["classifier.4.weight", "classifier.4.bias"] and unexpected == []
mask = train.targets < 5
opt5 = optim.Adam(five.classifier[4].parameters(), lr=1e-2)   # train the head only
for step in range(60):
    idx = np.random.default_rng(step).choice(np.flatnonzero(mask), 64)
    loss = F.cross_entropy(five(x[idx]), t[idx])
    opt5.zero_grad()
    loss.backward()
    opt5.step()
five.eval()
test_mask = test.targets < 5
with lz.no_grad():
    pred = five(test.data[test_mask][:, None]).data.argmax(axis=1)
head_acc = float((pred == test.targets[test_mask]).mean())
print(f"a new head on the old features, 60 steps on digits 0-4: accuracy {head_acc:.3f}")
assert head_acc > 0.9
shutil.rmtree(workdir)
