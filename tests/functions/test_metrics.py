"""accuracy: values against a hand count and PyTorch, dtype, constness, bad inputs."""
import numpy as np
import pytest
import torch

import lezero as lz
import lezero.functions as F
from lezero.testing import rand


def torch_accuracy(y, t, axis=1):
    return (torch.tensor(y).argmax(axis) == torch.tensor(t)).float().mean().item()


def test_hand_counted_value():
    y = np.array([[0.1, 0.7, 0.2],     # predicts 1
                  [2.0, -1.0, 0.5],    # predicts 0
                  [0.3, 0.3, 0.4],     # predicts 2
                  [5.0, 5.0, 1.0]],    # tie: the lowest index, 0
                 np.float32)
    t = np.array([1, 2, 2, 0])
    acc = F.accuracy(y, t)
    assert acc.item() == pytest.approx(0.75) and acc.shape == ()
    assert acc.dtype == np.float32 and not acc.requires_grad


@pytest.mark.parametrize("yshape", [(20, 5), (6, 4, 3), (4, 3, 2, 2)])
def test_matches_torch(yshape):
    y = rand(*yshape, dtype=np.float32, seed=1)
    t = np.random.default_rng(2).integers(0, yshape[1], size=yshape[:1] + yshape[2:])
    assert F.accuracy(lz.Variable(y), t).item() == pytest.approx(torch_accuracy(y, t))


def test_logits_and_probabilities_agree():
    logits = lz.Variable(rand(30, 4, seed=3))
    t = np.random.default_rng(4).integers(0, 4, size=30)
    acc = F.accuracy(logits, t)
    assert acc.item() == F.accuracy(F.softmax(logits), t).item()
    assert acc.dtype == np.float64 and 0 < acc.item() < 1


def test_accuracy_is_a_constant_outside_the_graph():
    y = lz.Variable(rand(4, 3, dtype=np.float32, seed=5))
    acc = F.accuracy(y * 2, np.array([0, 1, 2, 0]))
    assert acc.creator is None and not acc.requires_grad


@pytest.mark.parametrize("y,t,err,match", [
    (np.ones(3, np.float32), np.array(0), ValueError, r"accuracy: y must have shape \(N, C"),
    (np.ones((3, 2), np.float32), np.ones(3), TypeError, r"accuracy: t must hold integer.*float64"),
    (np.ones((3, 2), np.float32), np.zeros(4, int), ValueError,
     r"accuracy: t must have shape \(3,\) .* got \(4,\)"),
    (np.ones((3, 2), np.float32), np.array([0, 2, 1]), ValueError,
     r"accuracy: class index 2 is out of range for 2 classes"),
    (np.ones((3, 2), np.float32), np.array([0, -1, 1]), ValueError, r"class index -1"),
    (np.ones((0, 2), np.float32), np.zeros(0, int), ValueError, r"accuracy: empty batch"),
    ([[1.0, 0.0]], np.array([0]), TypeError, r"accuracy: y must be a Variable.*list"),
])
def test_bad_inputs(y, t, err, match):
    with pytest.raises(err, match=match):
        F.accuracy(y, t)


def test_accuracy_on_gpu(xp):
    y = rand(10, 3, dtype=np.float32, seed=6)
    t = np.random.default_rng(7).integers(0, 3, size=10)
    acc = F.accuracy(lz.Variable(xp.asarray(y)), xp.asarray(t))
    assert acc.item() == pytest.approx(torch_accuracy(y, t))
