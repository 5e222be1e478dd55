"""Step 25: softmax and cross entropy, to classify the points of a three-armed spiral.

A classifier outputs one score (a *logit*) per class.  Softmax turns the scores of a sample
into probabilities,

    p_c = exp(x_c) / sum_k exp(x_k),

and cross entropy is minus the log-probability of the correct class, -log p_target.  It is
0 when the model is certain and right, and large when it is confident and wrong.

Computed naively, exp overflows for large logits, and the gradient passes through softmax,
log and indexing one by one.  ``F.cross_entropy`` fuses them: the forward takes
logsumexp once (subtracting the row maximum first, so nothing overflows), the loss is
``logsumexp(x) - x_target``, and the gradient with respect to the logits is simply

    softmax(x) - onehot(target)            (divided by N for the mean over a batch)

computed from what the forward saved.  Below, the fused loss is checked against the
step-by-step formula, then trains a small MLP (built from F operators, updated by hand
with stochastic gradient descent) on a spiral that no straight line can separate.
Run: python steps/step25.py
"""
import numpy as np

import lezero as lz
import lezero.functions as F

rng = np.random.default_rng(0)
lz.manual_seed(0)

# 1. Softmax and cross entropy by hand, and fused.
logits = lz.Variable(np.array([[2.0, 1.0, 0.1], [0.5, 2.5, 0.3]], np.float32))
target = np.array([0, 2])
probs = F.softmax(logits, axis=1)
by_hand = -F.sum(F.log(probs[np.arange(2), target])) / 2
fused = F.cross_entropy(logits, target)
print("softmax rows:", np.round(probs.data.astype(float), 3).tolist(), "(each sums to 1)")
print(f"cross entropy by hand {by_hand.item():.6f}, fused {fused.item():.6f}")
fused.backward()
onehot = np.eye(3, dtype=np.float32)[target]
print("gradient == (softmax - onehot) / N:",
      np.allclose(logits.grad.data, (probs.data - onehot) / 2, atol=1e-7))
big = lz.Variable(np.array([[1000.0, 0.0, -1000.0]], np.float32))
print("no overflow at logits of 1000:", F.cross_entropy(big, np.array([1])).item())


# 2. The spiral: three arms of 100 points each, winding around the origin.
def spiral(n_per_class=100, n_classes=3, noise=0.2):
    xs, ts = [], []
    for c in range(n_classes):
        r = np.linspace(0.0, 1.0, n_per_class)
        angle = c * 2 * np.pi / n_classes + 4.0 * r + noise * rng.standard_normal(n_per_class)
        xs.append(np.stack([r * np.sin(angle), r * np.cos(angle)], axis=1))
        ts.append(np.full(n_per_class, c))
    return np.concatenate(xs).astype(np.float32), np.concatenate(ts)


x_train, t_train = spiral()
print("data:", x_train.shape, "labels:", np.bincount(t_train).tolist())

# 3. A two-layer MLP: 2 -> 30 (relu) -> 3 logits.  Weights are (out, in) as in PyTorch,
#    drawn with standard deviation sqrt(2 / fan_in) before a relu (He initialisation) and
#    sqrt(1 / fan_in) before the logits, so the signals start at a sensible scale.
hidden = 30
W1 = lz.Variable((rng.standard_normal((hidden, 2)) * np.sqrt(2 / 2)).astype(np.float32))
b1 = lz.Variable(np.zeros(hidden, np.float32))
W2 = lz.Variable((rng.standard_normal((3, hidden)) * np.sqrt(1 / hidden)).astype(np.float32))
b2 = lz.Variable(np.zeros(3, np.float32))
params = [W1, b1, W2, b2]


def model(x):
    h = F.relu(F.matmul(x, W1.T) + b1)
    return F.matmul(h, W2.T) + b2


# 4. Stochastic gradient descent on shuffled mini-batches of 30.
lr, batch, epochs = 1.0, 30, 300
for epoch in range(epochs):
    order = rng.permutation(len(x_train))
    total = 0.0
    for i in range(0, len(order), batch):
        idx = order[i:i + batch]
        loss = F.cross_entropy(model(x_train[idx]), t_train[idx])
        for p in params:
            p.cleargrad()
        loss.backward()
        for p in params:
            p.data -= lr * p.grad.data
        total += loss.item() * len(idx)
    if epoch % 50 == 0 or epoch == epochs - 1:
        print(f"epoch {epoch:3d}  loss {total / len(x_train):.4f}")

# 5. How well does it separate the arms?
with lz.no_grad():
    predicted = model(x_train).data.argmax(axis=1)
accuracy = float((predicted == t_train).mean())
print(f"training accuracy: {accuracy:.3f} (chance is 0.333)")
