"""Hardshrink, Softshrink, Threshold, CosineSimilarity, PairwiseDistance and ChannelShuffle
against torch.nn: forward and input gradients, constructor arguments, bad arguments."""
import math

import numpy as np
import pytest
import torch

import lezero as lz
from lezero import nn
from tests.nn.layers.layer_parity import check_layer, rand

ONE_INPUT = [
    ("Hardshrink", (), {}), ("Hardshrink", (1.2,), {}), ("Softshrink", (), {}),
    ("Softshrink", (), {"lambd": 0.8}), ("Threshold", (0.3, -2.0), {}),
    ("Threshold", (), {"threshold": -0.5, "value": 4.0, "inplace": True}),
    ("ChannelShuffle", (2,), {}), ("ChannelShuffle", (), {"groups": 4}),
]


@pytest.mark.parametrize("name,args,kwargs", ONE_INPUT,
                         ids=[f"{n}{a}{k}" for n, a, k in ONE_INPUT])
def test_one_input_layers_match_torch(name, args, kwargs):
    x = rand(2, 4, 3, 5, low=-3, high=3)
    torch_kwargs = dict(kwargs, inplace=False) if "inplace" in kwargs else kwargs
    check_layer(getattr(nn, name)(*args, **kwargs),
                getattr(torch.nn, name)(*args, **torch_kwargs), x)


TWO_INPUTS = [
    ("CosineSimilarity", (), {}, (4, 5, 3), (4, 5, 3)),
    ("CosineSimilarity", (-1,), {"eps": 1e-4}, (4, 5, 3), (3,)),
    ("CosineSimilarity", (), {"dim": 0}, (6, 2), (6, 1)),
    ("PairwiseDistance", (), {}, (4, 5), (4, 5)),
    ("PairwiseDistance", (1.0,), {"keepdim": True}, (2, 4, 5), (5,)),
    ("PairwiseDistance", (), {"p": math.inf, "eps": 0.0}, (4, 5), (4, 5)),
    ("PairwiseDistance", (3,), {"eps": 1e-3}, (3, 1, 5), (2, 5)),
]


@pytest.mark.parametrize("name,args,kwargs,s1,s2", TWO_INPUTS,
                         ids=[f"{n}{a}{k}{s1}{s2}" for n, a, k, s1, s2 in TWO_INPUTS])
def test_distance_layers_match_torch(name, args, kwargs, s1, s2):
    check_layer(getattr(nn, name)(*args, **kwargs), getattr(torch.nn, name)(*args, **kwargs),
                rand(*s1, seed=1), rand(*s2, seed=2))


def test_defaults_attributes_and_repr():
    assert (nn.Hardshrink().lambd, nn.Softshrink().lambd) == (0.5, 0.5)
    layer = nn.Threshold(0.1, 20)
    assert (layer.threshold, layer.value, layer.inplace) == (0.1, 20, False)
    assert repr(layer) == "Threshold(threshold=0.1, value=20)"
    cos = nn.CosineSimilarity()
    assert (cos.dim, cos.eps) == (1, 1e-8)
    pd = nn.PairwiseDistance()
    assert (pd.p, pd.eps, pd.keepdim) == (2.0, 1e-6, False)
    assert repr(nn.ChannelShuffle(3)) == "ChannelShuffle(groups=3)"
    for layer in (nn.Hardshrink(), cos, pd, nn.ChannelShuffle(2)):
        assert list(layer.state_dict()) == []


def test_dim_is_passed_as_axis_and_read_at_call_time():
    a, b = rand(3, 4, seed=3), rand(3, 4, seed=4)
    layer = nn.CosineSimilarity(dim=0)
    assert layer(a, b).shape == (4,)
    layer.dim = 1
    assert layer(a, b).shape == (3,)


def test_layers_inside_sequential_backpropagate():
    model = nn.Sequential(nn.Linear(6, 6), nn.Softshrink(0.1), nn.Threshold(0.0, -0.1),
                          nn.Hardshrink(0.05), nn.Unflatten(1, (6, 1)), nn.ChannelShuffle(3))
    x = lz.Variable(rand(2, 6, seed=5))
    y = model(x)
    assert y.shape == (2, 6, 1)
    y.sum().backward()
    assert model[0].weight.grad is not None and x.grad.shape == (2, 6)


@pytest.mark.parametrize("build,error,match", [
    (lambda: nn.Hardshrink("big"), TypeError, "Hardshrink: lambd must be a number"),
    (lambda: nn.Softshrink(-0.5), ValueError, "Softshrink: lambd must be non-negative"),
    (lambda: nn.Threshold(0.5), TypeError, "Threshold: missing a required argument: 'value'"),
    (lambda: nn.Threshold(0.5, None), TypeError, "Threshold: value must be a number"),
    (lambda: nn.Threshold(0.5, 1.0, inplace="no"), TypeError, "Threshold: inplace must be a bool"),
    (lambda: nn.CosineSimilarity(dim=1.5), TypeError, "CosineSimilarity: dim must be an int"),
    (lambda: nn.CosineSimilarity(eps="x"), TypeError, "CosineSimilarity: eps must be a number"),
    (lambda: nn.PairwiseDistance(keepdim=None), TypeError,
     "PairwiseDistance: keepdim must be a bool"),
    (lambda: nn.PairwiseDistance(p="fro"), TypeError, "PairwiseDistance: p must be a number"),
    (lambda: nn.ChannelShuffle(), TypeError, "ChannelShuffle: missing a required argument"),
    (lambda: nn.ChannelShuffle(2.0), TypeError, "ChannelShuffle: groups must be an int"),
])
def test_bad_constructor_arguments(build, error, match):
    with pytest.raises(error, match=match):
        build()


def test_bad_inputs_name_the_layer():
    x = lz.Variable(rand(2, 6, 3))
    with pytest.raises(ValueError, match=r"ChannelShuffle: channel_shuffle: the 6 channels"):
        nn.ChannelShuffle(4)(x)
    with pytest.raises(ValueError, match=r"ChannelShuffle: channel_shuffle: groups must be"):
        nn.ChannelShuffle(0)(x)
    with pytest.raises(ValueError, match=r"CosineSimilarity: cosine_similarity: x1 of shape"):
        nn.CosineSimilarity()(x, rand(4, 3))
    with pytest.raises(ValueError, match=r"CosineSimilarity: cosine_similarity: axis 5"):
        nn.CosineSimilarity(5)(x, x)
    with pytest.raises(TypeError, match=r"PairwiseDistance: forward takes 2 input"):
        nn.PairwiseDistance()(x)
    with pytest.raises(TypeError, match=r"Hardshrink: forward takes 1 input"):
        nn.Hardshrink()(x, x)
    with pytest.raises(TypeError, match=r"Softshrink: softshrink: input must be floating"):
        nn.Softshrink()(np.arange(3))
