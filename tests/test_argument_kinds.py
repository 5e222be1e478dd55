"""A wrong kind is a TypeError naming the argument, for every numeric constructor argument.

For each class below, one valid construction is given; every argument of it (or default)
that is an int or a float is replaced in turn by a string of the same digits, and the
constructor must raise a TypeError whose message names the class and the argument.  The
rule comes from ``lezero.utils.checks``: a wrong kind is a TypeError, a wrong value a
ValueError.
"""
import inspect

import numpy as np
import pytest

import lezero as lz
from lezero import data, nn, optim


def _params():
    return [lz.Parameter(np.ones((2, 2), np.float32))]


def _dataset():
    return data.TensorDataset(np.arange(6, dtype=np.float32))


def _sgd():
    return optim.SGD(_params(), lr=0.1, momentum=0.9)


# class -> (positional args, keyword args) of one valid construction; args may be
# callables, made fresh for every trial.
LAYERS = {
    nn.Linear: ((3, 4), {}), nn.Bilinear: ((2, 3, 4), {}),
    nn.Conv1d: ((2, 4, 3), {"stride": 1, "dilation": 1, "groups": 1}),
    nn.Conv2d: ((2, 4, 3), {"stride": 2}), nn.Conv3d: ((2, 4, 3), {}),
    nn.ConvTranspose2d: ((2, 4, 3), {"stride": 2, "output_padding": 1}),
    nn.BatchNorm1d: ((3,), {}), nn.BatchNorm2d: ((3,), {}), nn.InstanceNorm2d: ((3,), {}),
    nn.GroupNorm: ((2, 4), {}), nn.LayerNorm: ((4,), {}), nn.RMSNorm: ((4,), {"eps": 1e-6}),
    nn.LocalResponseNorm: ((3,), {}),
    nn.Embedding: ((10, 4), {"padding_idx": 1, "max_norm": 1.0}),
    nn.EmbeddingBag: ((10, 4), {"max_norm": 1.0}),
    nn.LSTM: ((3, 4), {"num_layers": 2, "dropout": 0.1}), nn.GRU: ((3, 4), {}),
    nn.RNN: ((3, 4), {}), nn.LSTMCell: ((3, 4), {}), nn.GRUCell: ((3, 4), {}),
    nn.RNNCell: ((3, 4), {}),
    nn.MultiheadAttention: ((8, 2), {"dropout": 0.1}),
    nn.TransformerEncoderLayer: ((8, 2), {"dim_feedforward": 16, "dropout": 0.1}),
    nn.TransformerDecoderLayer: ((8, 2), {"dim_feedforward": 16}),
    nn.Dropout: ((0.5,), {}), nn.Dropout2d: ((0.5,), {}), nn.AlphaDropout: ((0.5,), {}),
    nn.LeakyReLU: ((0.1,), {}), nn.ELU: ((1.0,), {}), nn.CELU: ((1.0,), {}),
    nn.Softplus: ((1.0, 20.0), {}), nn.Hardtanh: ((-1.0, 1.0), {}),
    nn.Threshold: ((0.1, 0.0), {}), nn.PReLU: ((2, 0.25), {}), nn.Softmax: ((1,), {}),
    nn.GLU: ((-1,), {}), nn.Hardshrink: ((0.5,), {}), nn.Softshrink: ((0.5,), {}),
    nn.RReLU: ((0.1, 0.3), {}),
    nn.MaxPool2d: ((2,), {"stride": 2, "padding": 1, "dilation": 1}),
    nn.AvgPool2d: ((2,), {"stride": 2, "padding": 1}), nn.LPPool2d: ((2, 2), {}),
    nn.AdaptiveAvgPool2d: ((3,), {}), nn.PixelShuffle: ((2,), {}),
    nn.PixelUnshuffle: ((2,), {}), nn.ChannelShuffle: ((2,), {}),
    nn.ConstantPad2d: ((1, 0.5), {}), nn.ZeroPad2d: ((1,), {}),
    nn.CrossEntropyLoss: ((), {"ignore_index": -100, "label_smoothing": 0.1}),
    nn.HuberLoss: ((), {"delta": 1.0}), nn.SmoothL1Loss: ((), {"beta": 1.0}),
    nn.MarginRankingLoss: ((), {"margin": 0.5}),
    nn.TripletMarginLoss: ((), {"margin": 1.0, "p": 2.0}),
    nn.CosineSimilarity: ((1, 1e-8), {}), nn.PairwiseDistance: ((2.0,), {}),
}
OPTIMIZERS = {
    optim.SGD: ((_params,), {"lr": 0.1, "momentum": 0.9, "dampening": 0.0,
                             "weight_decay": 0.0}),
    optim.Adam: ((_params,), {"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8}),
    optim.AdamW: ((_params,), {"lr": 1e-3}), optim.Adamax: ((_params,), {}),
    optim.NAdam: ((_params,), {}), optim.RMSprop: ((_params,), {"alpha": 0.9}),
    optim.Adagrad: ((_params,), {"lr_decay": 0.0}), optim.Adadelta: ((_params,), {"rho": 0.9}),
    optim.Lion: ((_params,), {}),
}
LOADERS = {
    data.DataLoader: ((_dataset,), {"batch_size": 2, "num_workers": 0, "prefetch_factor": 2,
                                    "timeout": 0, "seed": 3}),
    data.BatchSampler: ((lambda: range(6), 2, False), {}),
    data.RandomSampler: ((_dataset,), {"num_samples": 4}),
}
SCHEDULERS = {
    optim.lr_scheduler.StepLR: ((_sgd, 2), {"gamma": 0.5}),
    optim.lr_scheduler.ExponentialLR: ((_sgd, 0.9), {}),
    optim.lr_scheduler.CosineAnnealingLR: ((_sgd, 10), {"eta_min": 0.0}),
    optim.lr_scheduler.OneCycleLR: ((_sgd, 0.1), {"total_steps": 10}),
}
CLASSES = {**LAYERS, **OPTIMIZERS, **LOADERS, **SCHEDULERS}

# Arguments that take strings as well as numbers (the string is a valid value there).
TAKES_STRINGS = {(nn.Conv1d, "padding"), (nn.Conv2d, "padding"), (nn.Conv3d, "padding")}


def _is_number(v):
    return isinstance(v, (int, float, np.number)) and not isinstance(v, (bool, np.bool_))


def _numeric_arguments(cls, args, kwargs):
    """(name, how to pass it, valid value) of every int/float argument of the call or of
    the constructor's defaults."""
    sig = inspect.signature(cls)
    bound = sig.bind_partial(*args, **kwargs)
    found = []
    for i, (name, p) in enumerate(sig.parameters.items()):
        if name in bound.arguments:
            value = bound.arguments[name]
            position = i if i < len(args) else None
        elif p.default is not inspect.Parameter.empty:
            value, position = p.default, None
        else:
            continue
        if (cls, name) in TAKES_STRINGS:
            continue
        if _is_number(value):
            found.append((name, position, value))
        elif isinstance(value, tuple) and value and all(map(_is_number, value)):
            found.append((name, position, tuple(str(v) for v in value)))
    return found


CASES = [pytest.param(cls, name, position, value, id=f"{cls.__name__}-{name}")
         for cls, (args, kwargs) in CLASSES.items()
         for name, position, value in _numeric_arguments(cls, args, kwargs)]


def _make(args):
    return [a() if callable(a) and not isinstance(a, type) else a for a in args]


def test_the_sweep_covers_many_classes_and_arguments():
    assert len(CLASSES) >= 60 and len(CASES) >= 150


@pytest.mark.parametrize("cls", list(CLASSES), ids=lambda c: c.__name__)
def test_the_valid_construction_works(cls):
    args, kwargs = CLASSES[cls]
    cls(*_make(args), **kwargs)


@pytest.mark.parametrize("cls,name,position,value", CASES)
def test_a_string_for_a_number_is_a_type_error_naming_the_argument(cls, name, position, value):
    args, kwargs = CLASSES[cls]
    args, kwargs = _make(args), dict(kwargs)
    bad = value if isinstance(value, tuple) else str(value)
    if position is not None:
        args[position] = bad
    else:
        kwargs[name] = bad
    with pytest.raises(TypeError) as info:
        cls(*args, **kwargs)
    message = str(info.value)
    assert name in message, f"{cls.__name__}({name}={bad!r}): {message}"
    assert cls.__name__.split(".")[-1] in message, f"{cls.__name__}({name}={bad!r}): {message}"
