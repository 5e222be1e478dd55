"""Step 35: optimizers as objects, raced down the Rosenbrock valley.

``lezero.optim`` holds PyTorch's optimizers with PyTorch's arguments and update rules.
Each owns ``param_groups`` (the hyperparameters, editable) and ``state`` (per-parameter
buffers such as Adam's moving averages); ``zero_grad()`` / ``step()`` is the whole loop.

Rosenbrock's function f(x, y) = (1 - x)^2 + 100 (y - x^2)^2 has its minimum at (1, 1) at
the bottom of a long, curved, nearly flat valley: plain gradient descent must take tiny
steps (the walls are steep) and then crawls along the floor; momentum builds up speed
along the floor; Adam rescales each coordinate by its gradient history.
Run: python steps/step35.py
"""
import numpy as np

import lezero as lz
from lezero import optim


def rosenbrock(p):
    x, y = p[0], p[1]
    return (1 - x) ** 2 + 100 * (y - x ** 2) ** 2


def race(make_optimizer, steps=2000, start=(-1.5, 2.0)):
    p = lz.Parameter(np.array(start))
    opt = make_optimizer([p])
    path = [p.data.copy()]
    for _ in range(steps):
        opt.zero_grad()
        loss = rosenbrock(p)
        loss.backward()
        opt.step()
        path.append(p.data.copy())
    return np.array(path), rosenbrock(p).item()


contenders = {
    "SGD lr=1e-3": lambda ps: optim.SGD(ps, lr=1e-3),
    "SGD momentum 0.9": lambda ps: optim.SGD(ps, lr=1e-3, momentum=0.9),
    "SGD Nesterov 0.9": lambda ps: optim.SGD(ps, lr=1e-3, momentum=0.9, nesterov=True),
    "RMSprop lr=1e-2": lambda ps: optim.RMSprop(ps, lr=1e-2),
    "Adam lr=0.05": lambda ps: optim.Adam(ps, lr=0.05),
    "Lion lr=3e-3": lambda ps: optim.Lion(ps, lr=3e-3),
}
print("start (-1.5, 2.0), f = %.2f; minimum at (1, 1)" % rosenbrock(
    lz.Variable(np.array([-1.5, 2.0]))).item())
for name, make in contenders.items():
    path, f = race(make)
    dist = np.linalg.norm(path[-1] - 1.0)
    # the first step at which the point came within 0.1 of the minimum
    near = np.nonzero(np.linalg.norm(path - 1.0, axis=1) < 0.1)[0]
    when = f"step {near[0]:4d}" if near.size else "never"
    print(f"{name:18s} end ({path[-1][0]: .4f}, {path[-1][1]: .4f})  f={f:.2e}  "
          f"|p - (1,1)|={dist:.1e}  within 0.1: {when}")

# The learning rate is a group option that schedulers edit between steps.  Lion moves every
# coordinate by exactly lr per step, so at a fixed rate it keeps hopping around the minimum;
# decaying the rate with a cosine schedule lets it settle.
p = lz.Parameter(np.array([-1.5, 2.0]))
opt = optim.Lion([p], lr=2e-2)     # start high: the schedule brings it down
sched = optim.lr_scheduler.CosineAnnealingLR(opt, T_max=2000, eta_min=1e-6)
for _ in range(2000):
    opt.zero_grad()
    rosenbrock(p).backward()
    opt.step()
    sched.step()
print(f"Lion + cosine schedule: end ({p.data[0]:.4f}, {p.data[1]:.4f}), "
      f"f={rosenbrock(p).item():.2e}, final lr {sched.get_last_lr()[0]:.1e}")
