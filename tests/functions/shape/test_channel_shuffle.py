"""channel_shuffle: central differences, double backward, PyTorch parity, bad inputs."""
import numpy as np
import pytest
import torch.nn.functional as TF

import lezero as lz
import lezero.functions as F
from lezero.functions import registry
from lezero.testing import check_all, check_torch, rand

SHAPES = [((2, 6, 3), 3), ((2, 6, 3), 2), ((1, 8, 2, 3), 4), ((2, 4, 2, 2, 2), 2),
          ((3, 5, 2), 5), ((3, 5, 2), 1), ((1, 6, 1, 1), 6)]


@pytest.mark.parametrize("shape,groups", SHAPES, ids=[f"{s}-{g}" for s, g in SHAPES])
def test_channel_shuffle(shape, groups):
    check_all(lambda x: F.channel_shuffle(x, groups),
              lambda x: TF.channel_shuffle(x, groups), rand(*shape, seed=groups))


def test_channel_order_is_the_transpose_of_the_group_grid():
    x = np.arange(6, dtype=np.float32).reshape(1, 6, 1)
    np.testing.assert_array_equal(F.channel_shuffle(x, 3).data.ravel(), [0, 2, 4, 1, 3, 5])
    np.testing.assert_array_equal(F.channel_shuffle(x, 2).data.ravel(), [0, 3, 1, 4, 2, 5])


def test_shuffling_by_k_undoes_shuffling_by_g():
    x = rand(2, 12, 3, dtype=np.float32, seed=1)
    np.testing.assert_array_equal(F.channel_shuffle(F.channel_shuffle(x, 3), 4).data, x)


def test_float32_numpy_int_groups_and_constants():
    x = rand(2, 6, 2, dtype=np.float32, seed=2)
    y = F.channel_shuffle(x, np.int64(2))
    assert y.dtype == np.float32 and y.shape == (2, 6, 2) and not y.requires_grad
    check_torch(lambda v: F.channel_shuffle(v, 2), lambda t: TF.channel_shuffle(t, 2), x)


def test_empty_batch():
    y = F.channel_shuffle(np.zeros((0, 4, 3), np.float32), 2)
    assert y.shape == (0, 4, 3)


def test_registered_as_shape():
    info = registry.REGISTRY["channel_shuffle"]
    assert info.category == "shape" and info.fn is F.channel_shuffle


X = np.ones((2, 6, 3), np.float32)


@pytest.mark.parametrize("call,err,match", [
    (lambda: F.channel_shuffle(np.ones((2, 6, 3), np.int32), 2), TypeError,
     r"channel_shuffle: input must be floating point, got dtype int32"),
    (lambda: F.channel_shuffle(X.tolist(), 2), TypeError,
     r"channel_shuffle: input must be a Variable or an ndarray, got list"),
    (lambda: F.channel_shuffle(X, 2.0), TypeError, r"channel_shuffle: groups must be an int"),
    (lambda: F.channel_shuffle(X, True), TypeError, r"channel_shuffle: groups must be an int"),
    (lambda: F.channel_shuffle(X, 0), ValueError, r"channel_shuffle: groups must be positive"),
    (lambda: F.channel_shuffle(X, -2), ValueError, r"channel_shuffle: groups must be positive"),
    (lambda: F.channel_shuffle(X, 4), ValueError,
     r"channel_shuffle: the 6 channels are not divisible by groups=4"),
    (lambda: F.channel_shuffle(np.ones((2, 6), np.float32), 2), ValueError,
     r"channel_shuffle: expected \(N, C, \*\) input with at least 3 dims, got shape \(2, 6\)"),
])
def test_bad_inputs(call, err, match):
    with pytest.raises(err, match=match):
        call()


def test_on_gpu(xp):
    x = rand(2, 6, 2, 2, dtype=np.float32, seed=3)
    check_torch(lambda v: F.channel_shuffle(v, 3), lambda t: TF.channel_shuffle(t, 3), x, xp=xp)
    v = lz.Variable(xp.asarray(x))
    assert type(F.channel_shuffle(v, 2).data) is type(v.data)
