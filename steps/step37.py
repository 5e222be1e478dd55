"""Step 37: RNN and LSTM on a sine wave, trained with truncated backpropagation in time.

A recurrent network reads a sequence one step at a time, carrying a state: here it sees
y(t) of a noisy sine and predicts y(t + 1).  Backpropagating through all 1000 steps would
keep the whole history in memory; *truncated* backprop trains on windows of ``bptt``
steps: after each window's backward the graph behind the state is cut
(``loss.unchain_backward()``), so the next window starts from the state's *value*
without a path back into the previous window.

Two ways to run the same model (from the same initial weights, so their first epochs agree
to the printed digits):
1. step by step with ``nn.LSTMCell``, as a textbook (and DeZero) writes it;
2. one window at a time with ``nn.LSTM``, whose fused operator runs the whole window in
   one Function (its backward is hand-written BPTT): the same maths, far fewer Python calls.
Run: python steps/step37.py
"""
import time

import numpy as np

import lezero as lz
import lezero.functions as F
from lezero import nn, optim
from lezero.data.datasets import SinCurve

train_set, test_set = SinCurve(train=True), SinCurve(train=False)
xs, ts = train_set.data, train_set.targets          # (1000, 1) each: y(t) and y(t + 1)
hidden, bptt = 32, 30


class CellModel(nn.Module):
    """LSTMCell + Linear read-out, fed one time step per call (state kept inside)."""

    def __init__(self):
        super().__init__()
        self.cell = nn.LSTMCell(1, hidden)
        self.fc = nn.Linear(hidden, 1)
        self.state = None

    def reset_state(self):
        self.state = None

    def forward(self, x):                 # x: (1, 1), one time step of a batch of one
        self.state = self.cell(x, self.state)
        return self.fc(self.state[0])


class SequenceModel(nn.Module):
    """nn.LSTM over a whole window + Linear read-out at every step."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(1, hidden)
        self.fc = nn.Linear(hidden, 1)

    def forward(self, x, state=None):     # x: (T, 1, 1)
        out, state = self.lstm(x, state)
        return self.fc(out), state


# 1. Step by step: accumulate the loss over ``bptt`` steps, then backward and cut.
lz.manual_seed(0)
model = CellModel()
opt = optim.Adam(model.parameters(), lr=0.002)
t0 = time.perf_counter()
for epoch in range(2):
    model.reset_state()
    loss, count, total = 0, 0, 0.0
    for i, (x, t) in enumerate(zip(xs, ts)):
        loss = loss + F.mse_loss(model(x.reshape(1, 1)), t.reshape(1, 1))
        count += 1
        if count == bptt or i + 1 == len(xs):
            loss = loss / count           # the window's mean squared error
            opt.zero_grad()
            loss.backward()
            loss.unchain_backward()       # the state is now a leaf: the window is cut off
            opt.step()
            total += loss.item() * count
            loss, count = 0, 0
    h = model.state[0]
    print(f"cells  epoch {epoch + 1}  loss {total / len(xs):.4f}  state is a leaf: "
          f"{h.creator is None}")
cell_time = (time.perf_counter() - t0) / 2

# 2. A window at a time with the fused nn.LSTM.  Its final state (h, c) is an output of
#    the fused operator next to the sequence; the loss reaches the operator through the
#    sequence, so ``loss.unchain_backward()`` cuts the operator off from its inputs, and
#    ``unchain()`` makes the carried state a leaf as well.
lz.manual_seed(0)
model = SequenceModel()
opt = optim.Adam(model.parameters(), lr=0.002)
seq_x, seq_t = xs.reshape(-1, 1, 1), ts.reshape(-1, 1, 1)
t0 = time.perf_counter()
epochs = 60
for epoch in range(epochs):
    state, total = None, 0.0
    for start in range(0, len(seq_x), bptt):
        y, state = model(seq_x[start:start + bptt], state)
        loss = F.mse_loss(y, seq_t[start:start + bptt])
        opt.zero_grad()
        loss.backward()
        loss.unchain_backward()
        for s in state:
            s.unchain()
        opt.step()
        total += loss.item() * len(y)
    if epoch < 2 or (epoch + 1) % 20 == 0:
        print(f"fused  epoch {epoch + 1}  loss {total / len(xs):.4f}")
fused_time = (time.perf_counter() - t0) / epochs
print("(the same initial weights and windows: epochs 1 and 2 match the cells' losses)")
print(f"seconds per epoch: cells {cell_time:.2f}, fused {fused_time:.3f} "
      f"({cell_time / fused_time:.0f}x faster)")

# 3. One-step-ahead prediction on the noise-free curve, the state carried throughout.
with lz.no_grad():
    pred, _ = model(test_set.data.reshape(-1, 1, 1))
pred = pred.data.reshape(-1)
target = test_set.targets.reshape(-1)
print(f"test mean squared error: {np.mean((pred - target) ** 2):.5f} (the training noise "
      f"alone has variance {0.1 ** 2 / 12:.5f})")
print("t      ", np.arange(0, 1000, 125))
print("predict", np.round(pred[::125], 2))
print("target ", np.round(target[::125], 2))
