"""3-D pooling: central differences, double backward, PyTorch parity, indices, bad inputs."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import lezero as lz
import lezero.functions as F
from lezero.kernels import pooling as K
from tests.functions.pooling.test_pooling import check
from lezero.testing import check_torch, rand

SHAPE = (1, 2, 5, 6, 5)


def ties(*shape, seed):
    """float32 data in steps of 0.5: many equal values inside each window."""
    return np.round(rand(*shape, seed=seed, dtype=np.float32) * 2) / 2


MAX_CASES = [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=3, stride=2, ceil_mode=True),
    dict(kernel_size=(2, 3, 2), stride=(1, 2, 1), padding=(1, 1, 0), dilation=(2, 1, 1)),
    dict(kernel_size=(3, 2, 3), stride=2, padding=(1, 0, 1), dilation=(1, 2, 1),
         ceil_mode=True),
]


@pytest.mark.parametrize("kw", MAX_CASES, ids=str)
def test_max_pool3d(kw):
    check(lambda a: F.max_pool3d(a, **kw), lambda a: TF.max_pool3d(a, **kw), rand(*SHAPE, seed=1))


@pytest.mark.parametrize("kw", MAX_CASES, ids=str)
def test_max_pool3d_indices_and_ties_match_torch(kw):
    x = ties(2, 3, 6, 7, 6, seed=2)
    y, idx = F.max_pool3d(x, return_indices=True, **kw)
    ty, tidx = TF.max_pool3d(torch.tensor(x), return_indices=True, **kw)
    np.testing.assert_array_equal(y.data, ty.numpy())
    np.testing.assert_array_equal(idx.data, tidx.numpy())
    assert idx.dtype == np.int64 and not idx.requires_grad
    # the gradient of tied windows goes to the first maximum, as in torch
    check_torch(lambda a: F.max_pool3d(a, **kw), lambda a: TF.max_pool3d(a, **kw), x)


def test_max_pool3d_nan_and_inf_match_torch():
    x = ties(1, 2, 5, 5, 5, seed=3)
    x[0, 0, :2, :2, :2] = -np.inf           # an all -inf window
    x[0, 1, 2, 2, 2] = np.nan               # NaN wins
    x[0, 1, 2, 3, 3] = np.nan
    y, idx = F.max_pool3d(x, 3, stride=2, padding=1, return_indices=True)
    ty, tidx = TF.max_pool3d(torch.tensor(x), 3, stride=2, padding=1, return_indices=True)
    np.testing.assert_array_equal(y.data, ty.numpy())
    np.testing.assert_array_equal(idx.data, tidx.numpy())


def test_max_pool_reference_3d_equals_2d_on_a_depth_of_one():
    x = ties(4, 7, 6, seed=4)
    args = ((3, 2), (2, 1), (1, 1), (1, 2), (4, 4))
    y2, i2 = K.max_pool_ref(x, *args)
    y3, i3 = K.max_pool_ref(x[:, None], *[(1,) + a for a in args[:2]], (0,) + args[2],
                            (1,) + args[3], (1,) + args[4])
    np.testing.assert_array_equal(y3[:, 0], y2)
    np.testing.assert_array_equal(i3[:, 0], i2)


AVG_CASES = [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=3, stride=2, padding=1, count_include_pad=False),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
    dict(kernel_size=(2, 3, 2), stride=(2, 1, 2), ceil_mode=True),
    dict(kernel_size=2, divisor_override=3),
    dict(kernel_size=(3, 2, 2), stride=2, padding=(1, 1, 0), ceil_mode=True,
         divisor_override=5),
]


@pytest.mark.parametrize("kw", AVG_CASES, ids=str)
def test_avg_pool3d(kw):
    check(lambda a: F.avg_pool3d(a, **kw), lambda a: TF.avg_pool3d(a, **kw), rand(*SHAPE, seed=5))


ADAPTIVE_OUTS = [(3, 2, 2), 1, (4, None, 2), (5, 6, 5), (7, 3, 8), (None, None, None)]


@pytest.mark.parametrize("out", ADAPTIVE_OUTS, ids=str)
def test_adaptive_pools_3d(out):
    x = rand(*SHAPE, seed=6)
    check(lambda a: F.adaptive_avg_pool3d(a, out), lambda a: TF.adaptive_avg_pool3d(a, out), x)
    check(lambda a: F.adaptive_max_pool3d(a, out), lambda a: TF.adaptive_max_pool3d(a, out), x)


@pytest.mark.parametrize("out", ADAPTIVE_OUTS, ids=str)
def test_adaptive_max_pool3d_indices_and_ties_match_torch(out):
    x = ties(2, 3, 5, 6, 7, seed=7)
    y, idx = F.adaptive_max_pool3d(x, out, return_indices=True)
    ty, tidx = TF.adaptive_max_pool3d(torch.tensor(x), out, return_indices=True)
    np.testing.assert_array_equal(y.data, ty.numpy())
    np.testing.assert_array_equal(idx.data, tidx.numpy())
    assert idx.dtype == np.int64 and not idx.requires_grad
    check_torch(lambda a: F.adaptive_max_pool3d(a, out),
                lambda a: TF.adaptive_max_pool3d(a, out), x)


# One call of each operator: (name, positional arguments after x, keyword arguments).
ONE_OF_EACH = [
    ("max_pool3d", (3, 2, 1), {}),
    ("avg_pool3d", (3, 2, 1), dict(ceil_mode=True, count_include_pad=False)),
    ("adaptive_avg_pool3d", ((2, 4, 3),), {}),
    ("adaptive_max_pool3d", ((3, 4, 2),), {}),
]


def both(name, args, kw):
    """The LeZero and the PyTorch version of one call."""
    return (lambda a: getattr(F, name)(a, *args, **kw),
            lambda a: getattr(TF, name)(a, *args, **kw))


@pytest.mark.parametrize("name,args,kw", ONE_OF_EACH, ids=[c[0] for c in ONE_OF_EACH])
def test_unbatched_3d_pools(name, args, kw):
    check(*both(name, args, kw), rand(2, 5, 6, 5, seed=8))


def test_unbatched_max_pool3d_indices_match_torch():
    x = ties(2, 4, 5, 4, seed=8)
    _, idx = F.max_pool3d(x, 2, padding=1, return_indices=True)
    _, tidx = TF.max_pool3d(torch.tensor(x), 2, padding=1, return_indices=True)
    np.testing.assert_array_equal(idx.data, tidx.numpy())


def test_float32_in_float32_out():
    x = lz.Variable(rand(1, 2, 4, 4, 4, dtype=np.float32))
    outs = [F.max_pool3d(x, 2), F.avg_pool3d(x, 2), F.adaptive_avg_pool3d(x, 3),
            F.adaptive_max_pool3d(x, 3)]
    assert all(y.dtype == np.float32 for y in outs)
    sum(y.sum() for y in outs).backward()
    assert x.grad.dtype == np.float32


X5 = np.ones((1, 2, 4, 4, 4), np.float32)
WINDOWED = ("max_pool3d", "avg_pool3d")
ADAPTIVE = ("adaptive_avg_pool3d", "adaptive_max_pool3d")
# (operators, arguments, keyword arguments, error, message after "<operator>: ")
BAD = [
    (WINDOWED + ADAPTIVE, (np.ones((2, 4, 4), np.float32), 2), {}, ValueError,
     "expected a 4-D .* or 5-D input"),
    (WINDOWED + ADAPTIVE, (np.ones((1, 1, 4, 4, 4), np.int64), 2), {}, TypeError,
     "x must be floating"),
    (WINDOWED, (X5, (2, 2, 5)), {}, ValueError, "input of spatial size .* too small"),
    (WINDOWED, (X5, (2, 2, 7)), dict(padding=(0, 0, 1)), ValueError,   # padded width 6 < 7
     "input of spatial size .* too small"),
    (WINDOWED, (X5, 2), dict(padding=(0, 2, 0)), ValueError,
     "padding .* at most half of kernel_size"),
    (WINDOWED, (X5, (2, 2)), {}, TypeError, "kernel_size must be an int or a tuple of 3 ints"),
    (WINDOWED, (X5, 2), dict(stride=0), ValueError, "stride must be >= 1"),
    (("max_pool3d",), (X5, 2), dict(dilation=0), ValueError, "dilation must be >= 1"),
    (("avg_pool3d",), (X5, 2), dict(divisor_override=0), ValueError, "divisor_override"),
    (("avg_pool3d",), (X5, 2), dict(count_include_pad=None), TypeError,
     "count_include_pad must be a bool"),
    (ADAPTIVE, (X5, (0, 2, 2)), {}, ValueError, "output_size must be positive"),
    (ADAPTIVE, (X5, (1, 2)), {}, TypeError, "output_size must be an int or a tuple of 3 ints"),
    (("adaptive_max_pool3d",), (X5, 2), dict(return_indices="yes"), TypeError,
     "return_indices must be a bool"),
]


@pytest.mark.parametrize("op,args,kw,error,message",
                         [(op,) + case[1:] for case in BAD for op in case[0]],
                         ids=[f"{op}: {case[-1]}" for case in BAD for op in case[0]])
def test_bad_inputs_name_the_operator_and_argument(op, args, kw, error, message):
    with pytest.raises(error, match=f"{op}: {message}"):
        getattr(F, op)(*args, **kw)


@pytest.mark.parametrize("name,args,kw", ONE_OF_EACH, ids=[c[0] for c in ONE_OF_EACH])
def test_3d_pooling_on_each_backend_matches_torch(name, args, kw, xp):
    check_torch(*both(name, args, kw), rand(2, 3, 5, 6, 5, dtype=np.float32, seed=9), xp=xp)
