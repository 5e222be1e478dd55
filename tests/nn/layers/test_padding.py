"""Padding layers against torch.nn: every class with int and tuple padding on two input
ranks (forward and input gradient), negative padding (cropping), reprs, bad arguments and
bad inputs."""
import numpy as np
import pytest
import torch

from lezero import nn
from tests.nn.layers.layer_parity import check_layer, rand

KINDS = ["ConstantPad", "ZeroPad", "ReflectionPad", "ReplicationPad", "CircularPad"]
# A tuple padding per n, small enough for reflection (pad < size) on the shapes below.
TUPLES = {1: (2, 1), 2: (1, 2, 0, 3), 3: (1, 0, 2, 1, 0, 2)}
SPATIAL = {1: (5,), 2: (4, 5), 3: (3, 4, 4)}


def _layers(kind, n, padding):
    """(ours, torch's) for padding-layer ``kind`` over n dims."""
    args = (padding, 1.5) if kind == "ConstantPad" else (padding,)
    name = f"{kind}{n}d"
    return getattr(nn, name)(*args), getattr(torch.nn, name)(*args)


def _ranks(kind, n):
    """Two input ranks torch accepts: unbatched and batched for the copying pads; the
    padded dims alone and a batched (N, C, *) input for the constant ones."""
    return (n, n + 2) if kind in ("ConstantPad", "ZeroPad") else (n + 1, n + 2)


CASES = [(kind, n, padding, rank) for kind in KINDS for n in (1, 2, 3)
         for padding in (2 if n < 3 else 1, TUPLES[n]) for rank in _ranks(kind, n)]


@pytest.mark.parametrize("kind,n,padding,rank", CASES,
                         ids=[f"{k}{n}d-{p}-{r}D" for k, n, p, r in CASES])
def test_matches_torch_forward_and_backward(kind, n, padding, rank):
    ours, theirs = _layers(kind, n, padding)
    shape = (2, 3)[:rank - n][::-1] + SPATIAL[n] if rank > n else SPATIAL[n]
    assert len(shape) == rank
    (y,), _ = check_layer(ours, theirs, rand(*shape, seed=rank))
    assert y.dtype == np.float32


@pytest.mark.parametrize("kind,n,padding", [
    ("ConstantPad", 1, (-1, 2)), ("ZeroPad", 2, (1, -2, -1, 0)),
    ("ReflectionPad", 1, (2, -1)), ("ReflectionPad", 2, (-1, 2, 3, -2)),
    ("ReplicationPad", 1, (-2, 5)), ("ReplicationPad", 3, (1, -1, 0, 2, -1, 1)),
    ("CircularPad", 1, (-1, 2)), ("CircularPad", 2, (2, -1, -1, 3)),
])
def test_negative_padding_crops_as_torch(kind, n, padding):
    ours, theirs = _layers(kind, n, padding)
    check_layer(ours, theirs, rand(2, *SPATIAL[n], seed=3))


def test_values_for_each_mode():
    x = np.arange(4, dtype=np.float32).reshape(1, 4)
    expect = {"ReflectionPad1d": [2, 1, 0, 1, 2, 3, 2], "ReplicationPad1d": [0, 0, 0, 1, 2, 3, 3],
              "CircularPad1d": [2, 3, 0, 1, 2, 3, 0], "ZeroPad1d": [0, 0, 0, 1, 2, 3, 0]}
    for name, row in expect.items():
        np.testing.assert_array_equal(getattr(nn, name)((2, 1))(x).data, [row])
    np.testing.assert_array_equal(nn.ConstantPad1d(1, -7)(x).data, [[-7, 0, 1, 2, 3, -7]])


def test_reprs_and_attributes_match_torch():
    pairs = [(nn.ConstantPad2d(1, 2.5), torch.nn.ConstantPad2d(1, 2.5)),
             (nn.ZeroPad1d((1, 2)), torch.nn.ZeroPad1d((1, 2))),
             (nn.ReflectionPad3d(2), torch.nn.ReflectionPad3d(2)),
             (nn.CircularPad2d((1, 2, 3, 4)), torch.nn.CircularPad2d((1, 2, 3, 4)))]
    for ours, theirs in pairs:
        assert repr(ours) == repr(theirs)
        assert ours.padding == theirs.padding
        assert list(ours.state_dict()) == []
    assert nn.ZeroPad3d(1).value == 0.0


def test_plain_arrays_are_accepted():
    y = nn.ReplicationPad2d(1)(np.ones((1, 2, 3, 3), np.float32))
    assert y.shape == (1, 2, 5, 5) and np.all(y.data == 1)
    y = nn.ReflectionPad1d((-1, 1))(np.arange(4, dtype=np.float32).reshape(1, 4))
    np.testing.assert_array_equal(y.data, [[1, 2, 3, 2]])


@pytest.mark.parametrize("make,err,match", [
    (lambda: nn.ReflectionPad2d((1, 2, 3)), ValueError,
     r"ReflectionPad2d: padding must be an int or a tuple of 4 ints, got 3 values"),
    (lambda: nn.ZeroPad1d(1.5), TypeError, r"ZeroPad1d: padding must be an int or a tuple"),
    (lambda: nn.CircularPad1d((1, "2")), TypeError, r"CircularPad1d: padding must be"),
    (lambda: nn.ConstantPad3d(1, True), TypeError, r"ConstantPad3d: value must be a number"),
    (lambda: nn.ConstantPad1d(1), TypeError, r"value"),
])
def test_bad_arguments(make, err, match):
    with pytest.raises(err, match=match):
        make()


@pytest.mark.parametrize("layer,shape,match", [
    (nn.ReflectionPad2d(1), (3, 4),
     r"ReflectionPad2d: expected a 3-D \(C, H, W\) or 4-D \(N, C, H, W\) input, got shape"),
    (nn.ReflectionPad1d(1), (1, 2, 3, 4), r"ReflectionPad1d: expected a 2-D \(C, W\) or 3-D"),
    (nn.ReplicationPad3d(1), (2, 3, 4), r"ReplicationPad3d: expected a 4-D \(C, D, H, W\)"),
    (nn.CircularPad2d(1), (1, 1, 2, 3, 3), r"CircularPad2d: expected a 3-D"),
    (nn.ConstantPad3d(1, 0.0), (3, 4), r"ConstantPad3d: expected an input with at least 3"),
    (nn.ZeroPad2d(1), (3,), r"ZeroPad2d: expected an input with at least 2 dims"),
    (nn.ReflectionPad1d(4), (2, 3, 4),
     r"ReflectionPad1d: padding \(4, 4\) does not fit dim 2 of size 4 .*smaller than"),
    (nn.ReflectionPad2d((0, 0, 3, 0)), (2, 3, 5), r"ReflectionPad2d: padding \(3, 0\) "
                                                  r"does not fit dim 1 of size 3"),
    (nn.CircularPad1d((5, 0)), (2, 3, 4), r"CircularPad1d: .*wrap around at most once"),
    (nn.ReplicationPad1d(2), (2, 3, 0), r"ReplicationPad1d: .*must be non-empty"),
])
def test_bad_inputs_raise_value_errors_naming_the_layer(layer, shape, match):
    with pytest.raises(ValueError, match=match):
        layer(np.ones(shape, np.float32))


def test_circular_pad_equal_to_the_size_is_allowed():
    ours, theirs = _layers("CircularPad", 1, 4)
    check_layer(ours, theirs, rand(2, 3, 4))


def test_circular_pad_wraps_the_cropped_input_as_torch():
    ours, theirs = _layers("CircularPad", 1, (-2, 3))
    check_layer(ours, theirs, rand(2, 5))
    with pytest.raises(ValueError, match=r"CircularPad1d: padding \(-2, 4\) does not fit dim "
                                         r"1 of size 3 .*after cropping"):
        nn.CircularPad1d((-2, 4))(np.ones((2, 5), np.float32))
