"""bench_real's rows for the six workloads of ``bench_workloads.py`` (issue 22), built from
the same step functions but at any shape, so each runs at its own shape and a second one.
Builders take a shape dict and return ``(lezero_fn, torch_fn)``.

The step modules set thread variables when imported (for their own command lines); the
import here puts the environment back as it was, so these rows run in the user's default
environment like the rest of ``bench_real``.
"""
import importlib
import os

import numpy as np


def step_module(name):
    """``benchmarks/<name>.py`` imported with ``os.environ`` left as it was."""
    before = dict(os.environ)
    try:
        return importlib.import_module(name)
    finally:
        os.environ.clear()
        os.environ.update(before)


def _rng():
    return np.random.default_rng(0)


def lenet(shape):
    """LeNet-5 SGD step on (batch, 1, 32, 32) images."""
    b = step_module("bench_lenet")
    weights, _, _ = b.make_data(_rng())
    x = _rng().standard_normal((shape["batch"], 1, 32, 32)).astype(np.float32)
    t = _rng().integers(0, 10, shape["batch"])
    return b.lezero_step_fn(weights, x, t), b.torch_step_fn(weights, x, t)


def lstm(shape):
    """nn.LSTM h256 forward + backward on (seq, batch, 256)."""
    b = step_module("bench_lstm_layer")
    x = _rng().standard_normal((shape["seq"], shape["batch"], b.INPUT)).astype(np.float32)
    layer, ours = b.lezero_step_fn(x)
    return ours, b.torch_step_fn(layer.state_dict(), x)


def mlp(shape):
    """MLP 784-1000-1000-10 SGD step."""
    b = step_module("bench_mlp")
    weights = b.make_weights(_rng())
    x = _rng().standard_normal((shape["batch"], b.SIZES[0])).astype(np.float32)
    t = _rng().integers(0, b.SIZES[-1], shape["batch"]).astype(np.int64)
    return b.lezero_step_fn(weights, x, t), b.torch_step_fn(weights, x, t)


def gpt_mini(shape):
    """GPT-mini (2 layers, d128) training step on (batch, seq) tokens, seq <= 64."""
    b = step_module("bench_gpt_mini")
    idx = _rng().integers(0, b.VOCAB, (shape["batch"], shape["seq"]))
    targets = _rng().integers(0, b.VOCAB, (shape["batch"], shape["seq"]))
    model, ours = b.lezero_step_fn(idx, targets)
    return ours, b.torch_step_fn(model.state_dict(), idx, targets)


def conv(shape):
    """conv3x3 64->64 forward + backward on (batch, 64, size, size)."""
    b = step_module("bench_conv")
    n, s = shape["batch"], shape["size"]
    rng = _rng()
    x = rng.standard_normal((n, 64, s, s)).astype(np.float32)
    w = (rng.standard_normal((64, 64, 3, 3)) / np.sqrt(64 * 9)).astype(np.float32)
    gy = rng.standard_normal((n, 64, s, s)).astype(np.float32)
    return b.lezero_step(x, w, gy, 1), b.torch_step(x, w, gy, 1)


def add(backward):
    """``calls`` adds of two ``n``-element tensors (forward, or forward + backward)."""
    def build(shape):
        import torch

        import lezero as lz
        n, calls = shape["n"], shape["calls"]
        a, b = lz.Variable(np.ones(n, np.float32)), lz.Variable(np.ones(n, np.float32))
        ta = torch.ones(n, requires_grad=True)
        tb = torch.ones(n, requires_grad=True)

        def run(x, y):
            def step():
                for _ in range(calls):
                    z = x + y
                    if backward:
                        z.sum().backward() if n > 1 else z.backward()
            return step
        return run(a, b), run(ta, tb)
    return build
