"""Replay with autograd: training steps through a static graph, gradients as eager."""
import numpy as np
import pytest

import lezero as lz
import lezero.functions as F
from lezero import jit, nn, optim
from tests.jit.zoo import build


def _grads(model):
    return [p.grad.data.copy() for p in model.parameters()]


@pytest.mark.parametrize("name", ["lenet5", "gpt", "char_lstm", "mlp"])
def test_training_step_gradients_equal_eager(name):
    model, xs = build(name)
    model.train()
    g = jit.trace(model, *xs)

    def loss_of(out):
        out = out[0] if isinstance(out, tuple) else out
        return F.sum(out * out)
    model.zero_grad()
    loss_of(model(*xs)).backward()
    eager = _grads(model)
    model.zero_grad()
    static = loss_of(g(*xs))
    static.backward()
    for a, b in zip(_grads(model), eager):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_optimizer_steps_through_the_graph_match_eager():
    lz.manual_seed(0)
    a = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    b = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    b.load_state_dict(a.state_dict())
    x = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    g = jit.trace(a, x)
    opt_a, opt_b = optim.SGD(a.parameters(), lr=0.1), optim.SGD(b.parameters(), lr=0.1)
    for _ in range(3):
        for model, opt, run in ((a, opt_a, g), (b, opt_b, b)):
            opt.zero_grad()
            F.mean(run(x) ** 2).backward()
            opt.step()
    for p, q in zip(a.parameters(), b.parameters()):
        np.testing.assert_allclose(p.data, q.data, rtol=1e-6, atol=1e-7)


def test_gradient_reaches_input_variables():
    x = lz.Variable(np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3))
    g = jit.trace(lambda v: F.sum(F.sigmoid(v) * v), x)
    g(x).backward()
    expected = lz.Variable(x.data.copy())
    F.sum(F.sigmoid(expected) * expected).backward()
    np.testing.assert_allclose(x.grad.data, expected.grad.data, rtol=1e-6)


def test_dropout_replays_fresh_masks_like_eager():
    model = nn.Sequential(nn.Linear(6, 6), nn.Sigmoid(), nn.Dropout(0.3))
    x = np.ones((1024, 6), np.float32)       # enough draws to see a threshold off by 1e-3
    g = jit.trace(model, x)
    node = [n for n in g.graph.nodes if n.op == "ScaleShift"][0]
    assert node.attrs["_dropout"]["p"] == 0.3
    lz.manual_seed(5)
    first, second = g(x).data, g(x).data
    assert not np.array_equal(first, second)           # a new mask each call
    lz.manual_seed(5)
    np.testing.assert_array_equal(first, model(x).data)
    np.testing.assert_array_equal(second, model(x).data)


def test_inference_replay_builds_no_graph():
    model, xs = build("mlp")
    g = jit.trace(model, *xs)
    with lz.no_grad():
        y = g(*xs)
    assert y.creator is None and not y.requires_grad
