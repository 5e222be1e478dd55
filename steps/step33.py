"""Step 33: a training loop with nn.Sequential, a loss module, an optimizer and a DataLoader.

The parts of every training script are now objects with PyTorch's names:

    model = nn.Sequential(...)                 the function with parameters
    criterion = nn.CrossEntropyLoss()          the loss
    opt = optim.Adam(model.parameters())       the update rule, with its own state
    for x, t in DataLoader(dataset, batch_size, shuffle=True):
        loss = criterion(model(x), t)
        opt.zero_grad(); loss.backward(); opt.step()

The data is the three-armed spiral (300 points); no straight line separates its arms, so
the network has to bend the plane.  Two optimizers race from the same initial weights.
Run: python steps/step33.py
"""
import time

import numpy as np

import lezero as lz
import lezero.functions as F
from lezero import nn, optim
from lezero.data import DataLoader
from lezero.data.datasets import Spiral

train_set, test_set = Spiral(train=True), Spiral(train=False)
x_test, t_test = test_set.data, test_set.targets


def make_model():
    return nn.Sequential(nn.Linear(2, 30), nn.ReLU(), nn.Linear(30, 30), nn.ReLU(),
                         nn.Linear(30, 3))


def accuracy(model, x, t):
    model.eval()                            # no effect here, but the habit matters (step 34)
    with lz.no_grad():
        pred = model(x).data.argmax(axis=1)
    model.train()
    return float((pred == t).mean())


def train(model, opt, epochs=150):
    criterion = nn.CrossEntropyLoss()
    loader = DataLoader(train_set, batch_size=30, shuffle=True, seed=0)
    for epoch in range(epochs + 1):
        total = 0.0
        for x, t in loader:
            loss = criterion(model(x), t)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * len(t)
        if epoch % 50 == 0:
            print(f"  epoch {epoch:3d}  loss {total / len(train_set):.4f}  "
                  f"test accuracy {accuracy(model, x_test, t_test):.3f}")
    return model


lz.manual_seed(0)
start_model = make_model()
for name, make_opt in [("SGD, momentum 0.9", lambda p: optim.SGD(p, lr=0.1, momentum=0.9)),
                       ("Adam", lambda p: optim.Adam(p, lr=0.01))]:
    model = make_model()
    model.load_state_dict(start_model.state_dict())      # the same start for both
    opt = make_opt(model.parameters())
    print(f"{name}, learning rate {opt.param_groups[0]['lr']}:")
    t0 = time.perf_counter()
    train(model, opt)
    print(f"  {time.perf_counter() - t0:.1f} s\n")

# The optimizer's state (Adam's moving averages, per parameter) is part of a checkpoint:
state = opt.state_dict()
print("Adam state for the first weight:", sorted(state["state"][0]))
print("loss of a random guess, log(3) =", round(float(np.log(3)), 4))
print("a prediction:", F.softmax(model(x_test[:1]), axis=1).data.round(3))
