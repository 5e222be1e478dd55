"""Small models and data the quantization tests share."""
import numpy as np

import lezero as lz
from lezero import nn
from lezero import quantization as Q


def small_cnn(bn=True):
    """conv-bn-relu, pool, conv-relu, global average pool, linear-relu, linear."""
    norm = nn.BatchNorm2d(6) if bn else nn.Identity()
    return Q.QuantWrapper(nn.Sequential(
        nn.Conv2d(2, 6, 3, padding=1), norm, nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(6, 8, 3, padding=1, stride=1), nn.ReLU(), nn.AdaptiveAvgPool2d((2, 2)),
        nn.Flatten(), nn.Linear(32, 16), nn.ReLU(), nn.Linear(16, 4)))


def data(n=32, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 2, 8, 8)).astype(np.float32)
    t = (x[:, 0, :4].mean(axis=(1, 2)) > 0).astype(np.int64) + 2 * (
        x[:, 1, 4:].mean(axis=(1, 2)) > 0).astype(np.int64)
    return x, t


def warm(model, x, steps=3):
    """A few training steps so batch norm statistics and weights are not at their init."""
    opt = lz.optim.SGD(model.parameters(), lr=0.05)
    model.train()
    for _ in range(steps):
        loss = lz.functions.cross_entropy(model(x), (x[:, 0, 0, 0] > 0).astype(np.int64))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model.eval()


def ptq(model, x):
    prepared = Q.prepare(Q.fuse(model.eval()))
    Q.calibrate(prepared, [x[i:i + 8] for i in range(0, len(x), 8)])
    return prepared, Q.convert(prepared)


def run(model, x):
    with lz.no_grad():
        return model(x).data
