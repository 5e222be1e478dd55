"""Step 34: dropout and batch normalization, in training and in evaluation.

Two layers behave differently while training, and ``model.train()`` / ``model.eval()``
switch them (each passes ``training=self.training`` to its operator):

* ``nn.Dropout(p)`` zeroes each value with probability p and scales the rest by
  1 / (1 - p) so the expected value is unchanged; in evaluation it is the identity.
* ``nn.BatchNorm1d(C)`` normalises each feature with the *batch's* mean and variance while
  training, and folds them into running averages (buffers ``running_mean`` and
  ``running_var``, updated in place, plus ``num_batches_tracked``).  In evaluation it uses
  those averages, so a sample's output no longer depends on the rest of its batch.

Forgetting ``eval()`` before testing is a classic bug: the last part shows what it costs.
Run: python steps/step34.py
"""
import numpy as np

import lezero as lz
from lezero import nn, optim
from lezero.data import DataLoader
from lezero.data.datasets import Digits

lz.manual_seed(0)
np.set_printoptions(precision=3, suppress=True)

# 1. Dropout: random and rescaled in training, the identity in evaluation.
drop = nn.Dropout(p=0.5)
x = np.ones((2, 8), np.float32)
print("training:  ", drop(x).data[0])
print("again:     ", drop(x).data[0], "(a new mask each call)")
big = drop(np.ones((1000, 1000), np.float32)).data
print(f"mean over a million values: {big.mean():.4f} (the expectation is kept)")
drop.eval()
print("evaluation:", drop(x).data[0])

# 2. Batch norm: batch statistics in training, running statistics in evaluation.
bn = nn.BatchNorm1d(3)
rng = np.random.default_rng(0)
centre, spread = np.array([5.0, -2.0, 0.0]), np.array([2.0, 0.5, 1.0])
for _ in range(50):
    batch = (centre + spread * rng.standard_normal((32, 3))).astype(np.float32)
    out = bn(batch)
print("\nafter 50 training batches:")
print("  output mean per feature", out.data.mean(axis=0), "(normalised by the batch)")
print("  running_mean", bn.running_mean, "vs true mean", centre)
print("  running_var ", bn.running_var, "vs true variance", spread ** 2)
print("  num_batches_tracked", int(bn.num_batches_tracked))

sample = batch[:1]
others_a = (centre + spread * rng.standard_normal((7, 3))).astype(np.float32)
others_b = (centre + 3 * spread * rng.standard_normal((7, 3))).astype(np.float32)
train_a = bn(np.concatenate([sample, others_a])).data[0]
train_b = bn(np.concatenate([sample, others_b])).data[0]
bn.eval()
eval_a = bn(np.concatenate([sample, others_a])).data[0]
eval_b = bn(np.concatenate([sample, others_b])).data[0]
print("one sample in two different batches:")
print("  training  ", train_a, train_b, "-> depends on its batch")
print("  evaluation", eval_a, eval_b, "-> does not")

# 3. A digit classifier with both layers; test it with and without eval().
train_set, test_set = Digits(train=True), Digits(train=False)
model = nn.Sequential(nn.Flatten(), nn.Linear(64, 128), nn.BatchNorm1d(128), nn.ReLU(),
                      nn.Dropout(0.5), nn.Linear(128, 10))
opt = optim.Adam(model.parameters(), lr=1e-3)
criterion = nn.CrossEntropyLoss()
loader = DataLoader(train_set, batch_size=64, shuffle=True, seed=0)


def test_accuracy(batch_size):
    """Accuracy on the test set, fed in batches of ``batch_size``, in the current mode."""
    correct = 0
    with lz.no_grad():
        for i in range(0, len(test_set), batch_size):
            logits = model(test_set.data[i:i + batch_size])
            correct += int((logits.data.argmax(1) == test_set.targets[i:i + batch_size]).sum())
    return correct / len(test_set)


for epoch in range(1, 16):
    model.train()
    for x, t in loader:
        loss = criterion(model(x), t)
        opt.zero_grad()
        loss.backward()
        opt.step()
    if epoch % 5 == 0:
        model.eval()
        print(f"epoch {epoch:2d}  loss {loss.item():.3f}  test accuracy (eval) "
              f"{test_accuracy(64):.3f}")

model.eval()
print(f"\nevaluation mode: accuracy {test_accuracy(64):.3f} in batches of 64, "
      f"{test_accuracy(4):.3f} in batches of 4 (the batch size does not matter)")
model.train()
lz.manual_seed(1)
print(f"forgot eval():   accuracy {test_accuracy(64):.3f} in batches of 64, "
      f"{test_accuracy(4):.3f} in batches of 4 (dropout noise, and batch statistics "
      "from a few samples)")
