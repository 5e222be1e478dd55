"""The linear, convolution and normalization layers' constructors: the repr and the
attributes torch's layer has (compared with torch's for the same arguments), and every
argument check, whose message (compared whole) names the layer, the argument and what it
got -- a TypeError for a wrong kind, a ValueError for a wrong value."""
import pytest
import torch

from lezero import nn

LAYERS = [
    ("Linear", (3, 4), {}),
    ("Linear", (3, 4), dict(bias=False)),
    ("Bilinear", (2, 3, 4), {}),
    ("Bilinear", (2, 3, 4), dict(bias=False)),
    ("Conv1d", (2, 4, 3), {}),
    ("Conv2d", (2, 4, 3), dict(stride=2, padding=1, dilation=2, groups=2, bias=False,
                               padding_mode="reflect")),
    ("Conv2d", (2, 4, (3, 1)), dict(padding="same", padding_mode="circular")),
    ("Conv3d", (2, 4, 2), dict(padding="valid")),
    ("Conv1d", (4, 4, 3), dict(groups=4, padding=(1,), padding_mode="replicate")),
    ("ConvTranspose1d", (2, 4, 3), dict(stride=2, output_padding=1)),
    # positional: stride, padding, output_padding, groups, bias, dilation
    ("ConvTranspose2d", (4, 2, 3, 2, 1, 1, 2, False, 2), {}),
    ("ConvTranspose3d", (2, 2, 2), {}),
    ("BatchNorm1d", (4,), {}),
    ("BatchNorm2d", (3,), dict(eps=1e-3, momentum=None, affine=False, track_running_stats=False)),
    ("BatchNorm3d", (2,), dict(bias=False)),
    ("InstanceNorm2d", (3,), {}),
    ("InstanceNorm1d", (3,), dict(affine=True, track_running_stats=True, bias=False)),
    ("LayerNorm", (4,), {}),
    ("LayerNorm", ((2, 3),), dict(eps=1e-6, elementwise_affine=False)),
    ("LayerNorm", (4,), dict(bias=False)),
    ("RMSNorm", (4,), {}),
    ("RMSNorm", ([2, 3],), dict(eps=1e-5, elementwise_affine=False)),
    ("GroupNorm", (2, 4), {}),
    ("GroupNorm", (1, 3), dict(eps=1e-3, affine=False)),
    ("GroupNorm", (2, 4), dict(bias=False)),
    ("LocalResponseNorm", (3,), {}),
    ("LocalResponseNorm", (2,), dict(alpha=1e-3, beta=0.5, k=2.0)),
]
ATTRIBUTES = ("weight", "bias", "running_mean", "running_var", "num_batches_tracked")


@pytest.mark.parametrize("name,args,kwargs", LAYERS,
                         ids=[f"{n}{a}{k or ''}" for n, a, k in LAYERS])
def test_repr_and_attributes_are_torchs(name, args, kwargs):
    ours, theirs = getattr(nn, name)(*args, **kwargs), getattr(torch.nn, name)(*args, **kwargs)
    assert repr(ours).split("  #")[0] == repr(theirs)       # ours adds "  # N params"
    for attr in ATTRIBUTES:                  # present, and None where torch's is None
        assert hasattr(ours, attr) == hasattr(theirs, attr), attr
        assert (getattr(ours, attr, None) is None) == (getattr(theirs, attr, None) is None), attr
    assert [(n, tuple(p.shape)) for n, p in ours.named_parameters()] == \
        [(n, tuple(p.shape)) for n, p in theirs.named_parameters()]


BAD = [
    (lambda: nn.Linear(3, 0), ValueError, "Linear: out_features must be a positive int, got 0"),
    (lambda: nn.Linear("3", 4), TypeError, "Linear: in_features must be an int, got str '3'"),
    (lambda: nn.Bilinear(0, 3, 4), ValueError,
     "Bilinear: in1_features must be a positive int, got 0"),
    (lambda: nn.Bilinear(2, 0, 4), ValueError,
     "Bilinear: in2_features must be a positive int, got 0"),
    (lambda: nn.Bilinear(2, 3, 0), ValueError,
     "Bilinear: out_features must be a positive int, got 0"),
    # convolutions
    (lambda: nn.Conv2d(0, 4, 3), ValueError, "Conv2d: in_channels must be a positive int, got 0"),
    (lambda: nn.Conv2d(2, 0, 3), ValueError, "Conv2d: out_channels must be a positive int, got 0"),
    (lambda: nn.Conv2d(2, 4, 3, groups=0), ValueError,
     "Conv2d: groups must be a positive int, got 0"),
    (lambda: nn.Conv2d(2, 3, 3, groups=2), ValueError,
     "Conv2d: in_channels (2) and out_channels (3) must be divisible by groups (2)"),
    (lambda: nn.Conv1d(2, 4, 0), ValueError, "Conv1d: kernel_size must be >= 1 in every dim, got 0"),
    (lambda: nn.Conv1d(2, 4, 3, stride="1"), TypeError,
     "Conv1d: stride must be an int or a tuple of 1 ints, got str '1'"),
    (lambda: nn.Conv2d(2, 4, 3, stride=(1, 0)), ValueError,
     "Conv2d: stride must be >= 1 in every dim, got (1, 0)"),
    (lambda: nn.Conv2d(2, 4, 3, dilation=(1,)), TypeError,
     "Conv2d: dilation must be an int or a tuple of 2 ints, got tuple (1,)"),
    (lambda: nn.Conv2d(2, 4, 3, dilation=0), ValueError,
     "Conv2d: dilation must be >= 1 in every dim, got 0"),
    (lambda: nn.Conv3d(2, 4, 3, padding=1.0), TypeError,
     "Conv3d: padding must be an int or a tuple of 3 ints, got float 1.0"),
    (lambda: nn.Conv3d(2, 4, 3, padding=-1), ValueError,
     "Conv3d: padding must be >= 0 in every dim, got -1"),
    (lambda: nn.Conv2d(2, 4, 3, padding_mode="mirror"), ValueError,
     "Conv2d: padding_mode must be 'zeros', 'reflect', 'replicate' or 'circular', "
     "got 'mirror'"),
    (lambda: nn.ConvTranspose2d(2, 4, 3, output_padding=(1,)), TypeError,
     "ConvTranspose2d: output_padding must be an int or a tuple of 2 ints, got tuple (1,)"),
    (lambda: nn.ConvTranspose2d(2, 4, 3, output_padding=-1), ValueError,
     "ConvTranspose2d: output_padding must be >= 0 in every dim, got -1"),
    (lambda: nn.ConvTranspose1d(2, 4, 3, padding_mode="reflect"), ValueError,
     "ConvTranspose1d: only padding_mode='zeros' is supported, got 'reflect'"),
    (lambda: nn.ConvTranspose2d(2, 4, 3, padding="same"), TypeError,
     "ConvTranspose2d: padding must be an int or a tuple of 2 ints, got str 'same'"),
    # batch and instance norm
    (lambda: nn.BatchNorm1d(0), ValueError, "BatchNorm1d: num_features must be a positive int, got 0"),
    (lambda: nn.BatchNorm1d(3, affine="yes"), TypeError,
     "BatchNorm1d: affine must be a bool, got str 'yes'"),
    (lambda: nn.BatchNorm1d(3, track_running_stats=1), TypeError,
     "BatchNorm1d: track_running_stats must be a bool, got 1"),
    (lambda: nn.BatchNorm2d(3, bias=None), TypeError,
     "BatchNorm2d: bias must be a bool, got NoneType None"),
    (lambda: nn.BatchNorm1d(3, eps=-1e-5), ValueError,
     "BatchNorm1d: eps must be in [0.0, inf), got -1e-05"),
    (lambda: nn.BatchNorm1d(3, eps="1e-5"), TypeError,
     "BatchNorm1d: eps must be a number, got str '1e-5'"),
    (lambda: nn.BatchNorm1d(3, momentum=-0.1), ValueError,
     "BatchNorm1d: momentum must be in [0.0, 1.0], got -0.1"),
    (lambda: nn.InstanceNorm1d(3, momentum=1.5), ValueError,
     "InstanceNorm1d: momentum must be in [0.0, 1.0], got 1.5"),
    (lambda: nn.InstanceNorm2d(3, bias="no"), TypeError,
     "InstanceNorm2d: bias must be a bool, got str 'no'"),
    # layer norm, RMS norm
    (lambda: nn.LayerNorm(0), ValueError,
     "LayerNorm: normalized_shape must be a positive int or a non-empty tuple of them, got 0"),
    (lambda: nn.LayerNorm(()), ValueError,
     "LayerNorm: normalized_shape must be a positive int or a non-empty tuple of them, got ()"),
    (lambda: nn.RMSNorm((2, -1)), ValueError,
     "RMSNorm: normalized_shape must be a positive int or a non-empty tuple of them, "
     "got (2, -1)"),
    (lambda: nn.LayerNorm("4"), TypeError,
     "LayerNorm: normalized_shape must be an int or a tuple of ints, got str '4'"),
    (lambda: nn.LayerNorm(4, elementwise_affine="no"), TypeError,
     "LayerNorm: elementwise_affine must be a bool, got str 'no'"),
    (lambda: nn.LayerNorm(4, bias=1), TypeError, "LayerNorm: bias must be a bool, got 1"),
    (lambda: nn.LayerNorm(4, eps=-1.0), ValueError, "LayerNorm: eps must be in [0.0, inf), got -1.0"),
    (lambda: nn.RMSNorm(4, eps=-1.0), ValueError, "RMSNorm: eps must be in [0.0, inf), got -1.0"),
    # group norm, local response norm
    (lambda: nn.GroupNorm(0, 4), ValueError, "GroupNorm: num_groups must be a positive int, got 0"),
    (lambda: nn.GroupNorm(2, 0), ValueError,
     "GroupNorm: num_channels must be a positive int, got 0"),
    (lambda: nn.GroupNorm(3, 4), ValueError,
     "GroupNorm: num_channels (4) must be divisible by num_groups (3)"),
    (lambda: nn.GroupNorm(2, 4, affine="yes"), TypeError,
     "GroupNorm: affine must be a bool, got str 'yes'"),
    (lambda: nn.GroupNorm(2, 4, bias=0), TypeError, "GroupNorm: bias must be a bool, got 0"),
    (lambda: nn.GroupNorm(2, 4, eps=-1e-5), ValueError,
     "GroupNorm: eps must be in [0.0, inf), got -1e-05"),
    (lambda: nn.GroupNorm(2, 4, eps="x"), TypeError, "GroupNorm: eps must be a number, got str 'x'"),
    (lambda: nn.LocalResponseNorm(0), ValueError,
     "LocalResponseNorm: size must be a positive int, got 0"),
    (lambda: nn.LocalResponseNorm(2, alpha="1"), TypeError,
     "LocalResponseNorm: alpha must be a number, got str '1'"),
    (lambda: nn.LocalResponseNorm(2, beta=None), TypeError,
     "LocalResponseNorm: beta must be a number, got NoneType None"),
    (lambda: nn.LocalResponseNorm(2, k="1"), TypeError,
     "LocalResponseNorm: k must be a number, got str '1'"),
]


@pytest.mark.parametrize("make,error,message", BAD, ids=[m for _, _, m in BAD])
def test_a_bad_argument_raises_naming_it(make, error, message):
    with pytest.raises(error) as info:
        make()
    assert type(info.value) is error and info.value.args == (message,)
