"""Convolution operators: central differences (float64), double backward, PyTorch parity
(float32) for conv1d/2d/3d, conv_transpose1d/2d/3d, unfold and fold; and bad inputs."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import lezero as lz
import lezero.functions as F
from lezero.testing import check_double_backward, check_gradient, check_torch, rand

# PyTorch warns that it copies the input for padding="same" with even kernels; we test that.
pytestmark = pytest.mark.filterwarnings("ignore:Using padding='same'")

# (x shape, w shape, kwargs, with bias)
CONV2D = [
    ((2, 3, 5, 5), (4, 3, 3, 3), dict(padding=1), True),
    ((1, 4, 6, 5), (4, 2, 3, 2), dict(stride=2, padding=(1, 0), dilation=(1, 2), groups=2), False),
    ((1, 3, 5, 5), (6, 1, 3, 3), dict(padding="same", groups=3), True),        # depthwise x2
    ((2, 2, 4, 5), (3, 2, 1, 1), dict(stride=2), True),                        # pointwise
    ((1, 2, 6, 6), (2, 2, 3, 3), dict(padding="valid", stride=(2, 1)), False),
    ((1, 2, 5, 6), (2, 2, 2, 4), dict(padding="same", dilation=2), False),     # asymmetric pad
]
CONV1D = [((2, 3, 7), (4, 3, 3), dict(stride=2, padding=1), True),
          ((1, 4, 8), (4, 1, 2), dict(padding="same", dilation=3, groups=4), False)]
CONV3D = [((1, 2, 4, 4, 3), (3, 2, 2, 3, 2), dict(padding=(1, 0, 1), stride=(1, 2, 1)), True),
          ((1, 2, 3, 4, 4), (2, 1, 1, 2, 2), dict(groups=2, dilation=(1, 2, 1)), False)]
# transposed: weight is (in, out / groups, *k)
CONVT = [
    ("conv_transpose1d", (2, 3, 4), (3, 2, 3), dict(stride=2, padding=1, output_padding=1), True),
    ("conv_transpose2d", (1, 4, 3, 3), (4, 1, 3, 2),
     dict(stride=(2, 1), padding=(1, 0), groups=2, dilation=(1, 2)), True),
    ("conv_transpose2d", (2, 2, 3, 4), (2, 3, 2, 2), dict(stride=3, output_padding=(2, 1)), False),
    ("conv_transpose3d", (1, 2, 2, 3, 2), (2, 2, 2, 2, 2), dict(stride=2, padding=1), True),
]


def _ops(name, w_shape, kwargs, bias):
    """(lezero fn, torch fn) taking (x, w[, b])."""
    lz_op, t_op = getattr(F, name), getattr(TF, name)
    if bias:
        return (lambda x, w, b: lz_op(x, w, b, **kwargs)), (lambda x, w, b: t_op(x, w, b, **kwargs))
    return (lambda x, w: lz_op(x, w, **kwargs)), (lambda x, w: t_op(x, w, **kwargs))


def _arrays(x_shape, w_shape, bias, bias_len, seed=0):
    arrs = [rand(*x_shape, seed=seed), rand(*w_shape, seed=seed + 1)]
    return arrs + [rand(bias_len, seed=seed + 2)] if bias else arrs


def _run_checks(name, x_shape, w_shape, kwargs, bias, bias_len, double=True):
    fn, tfn = _ops(name, w_shape, kwargs, bias)
    arrs = _arrays(x_shape, w_shape, bias, bias_len)
    check_gradient(fn, *arrs)
    if double:
        check_double_backward(fn, *arrs)
    check_torch(fn, tfn, *[a.astype(np.float32) for a in arrs])


@pytest.mark.parametrize("x_shape,w_shape,kwargs,bias", CONV2D)
def test_conv2d(x_shape, w_shape, kwargs, bias):
    _run_checks("conv2d", x_shape, w_shape, kwargs, bias, w_shape[0])


@pytest.mark.parametrize("x_shape,w_shape,kwargs,bias", CONV1D)
def test_conv1d(x_shape, w_shape, kwargs, bias):
    _run_checks("conv1d", x_shape, w_shape, kwargs, bias, w_shape[0])


@pytest.mark.parametrize("x_shape,w_shape,kwargs,bias", CONV3D)
def test_conv3d(x_shape, w_shape, kwargs, bias):
    _run_checks("conv3d", x_shape, w_shape, kwargs, bias, w_shape[0], double=bias)


@pytest.mark.parametrize("name,x_shape,w_shape,kwargs,bias", CONVT)
def test_conv_transpose(name, x_shape, w_shape, kwargs, bias):
    groups = kwargs.get("groups", 1)
    # check_double_backward feeds the gradient through a nonlinear upstream (gy + w * y),
    # so the second derivative of these bilinear operators is really exercised
    _run_checks(name, x_shape, w_shape, kwargs, bias, w_shape[1] * groups)


@pytest.mark.parametrize("kwargs", [dict(kernel_size=(2, 3)),
                                    dict(kernel_size=2, dilation=(2, 1), padding=1, stride=(1, 2))])
def test_unfold_and_fold(kwargs):
    x = rand(2, 3, 5, 4, seed=5)
    check_gradient(lambda a: F.unfold(a, **kwargs), x)
    # unfold is linear: only the nonlinear upstream of check_double_backward (and an
    # explicit square) make its second-order check depend on the backward being right
    check_double_backward(lambda a: F.unfold(a, **kwargs), x)
    check_double_backward(lambda a: F.unfold(a, **kwargs) ** 2, x)
    check_torch(lambda a: F.unfold(a, **kwargs), lambda a: TF.unfold(a, **kwargs),
                x.astype(np.float32))
    cols = F.unfold(x, **kwargs).shape
    c = rand(*cols, seed=6)
    check_gradient(lambda a: F.fold(a, (5, 4), **kwargs), c)
    check_torch(lambda a: F.fold(a, (5, 4), **kwargs), lambda a: TF.fold(a, (5, 4), **kwargs),
                c.astype(np.float32))
    # linear operators: the second derivative is zero, and that is what we compute
    check_double_backward(lambda a: F.fold(a, (5, 4), **kwargs) ** 2, c)


def test_unbatched_inputs_match_torch():
    check_torch(lambda x, w: F.conv2d(x, w, padding=1), lambda x, w: TF.conv2d(x, w, padding=1),
                rand(3, 5, 4, dtype=np.float32), rand(2, 3, 3, 3, dtype=np.float32, seed=1))
    check_torch(lambda x, w: F.conv1d(x, w), lambda x, w: TF.conv1d(x, w),
                rand(3, 6, dtype=np.float32), rand(2, 3, 2, dtype=np.float32, seed=1))
    check_torch(lambda x, w: F.conv_transpose2d(x, w, stride=2),
                lambda x, w: TF.conv_transpose2d(x, w, stride=2),
                rand(3, 3, 2, dtype=np.float32), rand(3, 2, 2, 2, dtype=np.float32, seed=1))
    check_torch(lambda x: F.unfold(x, 2), lambda x: TF.unfold(x, 2),
                rand(2, 4, 3, dtype=np.float32))
    check_torch(lambda c: F.fold(c, (3, 3), 2), lambda c: TF.fold(c, (3, 3), 2),
                rand(8, 4, dtype=np.float32))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dtype_is_preserved(dtype):
    x = lz.Variable(rand(1, 2, 5, 5, dtype=dtype))
    w = lz.Variable(rand(3, 2, 3, 3, dtype=dtype, seed=1))
    b = lz.Variable(rand(3, dtype=dtype, seed=2))
    for y in (F.conv2d(x, w, b, padding=1), F.conv_transpose2d(F.conv2d(x, w), w)):
        assert y.dtype == dtype
        y.sum().backward()
        assert x.grad.dtype == dtype and w.grad.dtype == dtype
        x.cleargrad(), w.cleargrad()


def test_constant_weight_gets_no_gradient_and_none_is_computed():
    x = lz.Variable(rand(1, 2, 6, 6, dtype=np.float32))
    w = rand(3, 2, 3, 3, dtype=np.float32, seed=1)            # a plain array: a constant
    with lz.TimerHook() as timer:
        F.conv2d(x, w, padding=1).sum().backward()
    assert x.grad is not None
    called = timer.summary()
    assert "ConvGradInput" in called and "ConvGradWeight" not in called


def test_second_order_gradient_matches_torch():
    """d/dw of ||d conv / dx||^2: exercises ConvGradInput's own backward."""
    x0, w0 = rand(1, 2, 5, 5, dtype=np.float32), rand(3, 2, 3, 3, dtype=np.float32, seed=1)
    x, w = lz.Variable(x0), lz.Variable(w0)
    (gx,) = lz.grad(F.conv2d(x, w, padding=1).sum(), [x], create_graph=True)
    (gw,) = lz.grad((gx * gx).sum(), [w])
    tx, tw = torch.tensor(x0, requires_grad=True), torch.tensor(w0, requires_grad=True)
    (tgx,) = torch.autograd.grad(TF.conv2d(tx, tw, padding=1).sum(), [tx], create_graph=True)
    (tgw,) = torch.autograd.grad((tgx * tgx).sum(), [tw])
    np.testing.assert_allclose(gw.data, tgw.numpy(), rtol=1e-4, atol=1e-4)


# ----- bad inputs ------------------------------------------------------------------------

X = np.zeros((1, 4, 6, 6), np.float32)
W = np.zeros((2, 4, 3, 3), np.float32)


@pytest.mark.parametrize("call,exc,match", [
    (lambda: F.conv2d(X.astype(np.int64), W), TypeError, "conv2d: x must be floating"),
    (lambda: F.conv2d([[1.0]], W), TypeError, "conv2d: x must be a Variable"),
    (lambda: F.conv2d(X, W[0]), ValueError, "conv2d: weight must be 4-D"),
    (lambda: F.conv2d(X[0, 0], W), ValueError, r"conv2d: x must be 4-D .* got shape \(6, 6\)"),
    (lambda: F.conv2d(X, W[:, :3]), ValueError, "conv2d: x has 4 channels but weight"),
    (lambda: F.conv2d(X, W.astype(np.float64)),
     TypeError, "conv2d: x dtype float32 and weight"),
    (lambda: F.conv2d(X, W[:, :2], groups=3), ValueError, "divisible by groups=3"),
    (lambda: F.conv2d(X, W, groups=0), ValueError, "conv2d: groups must be a positive int"),
    (lambda: F.conv2d(X, W, groups=1.0), TypeError, "conv2d: groups must be an int, got float"),
    (lambda: F.conv2d(X, W, stride=0), ValueError, "conv2d: stride must be >= 1"),
    (lambda: F.conv2d(X, W, stride=(1, 2, 3)),
     TypeError, "conv2d: stride must be an int or a tuple of 2"),
    (lambda: F.conv2d(X, W, padding=-1), ValueError, "conv2d: padding must be >= 0"),
    (lambda: F.conv2d(X, W, padding="full"), ValueError, "conv2d: padding must be an int, a tuple"),
    (lambda: F.conv2d(X, W, padding="same", stride=2),
     ValueError, "'same' is not supported for strided"),
    (lambda: F.conv2d(X, W, dilation=4),
     ValueError, "kernel size 9 is larger than the padded input"),
    (lambda: F.conv2d(X, W, bias=np.zeros(3, np.float32)),
     ValueError, r"conv2d: bias must have shape \(2,\)"),
    (lambda: F.conv2d(X, W, bias=np.zeros(2)), TypeError, "conv2d: bias dtype float64"),
    (lambda: F.conv2d(X, W, algo="magic"), ValueError, "conv2d: algo must be one of"),
    (lambda: F.conv2d(X, W, algo=None), TypeError, "conv2d: algo must be a str"),
    (lambda: F.conv2d(X, W, stride=2, algo="winograd"), ValueError, "algo='winograd' needs a 3x3"),
    (lambda: F.conv3d(np.zeros((1, 4, 5, 5, 5), np.float32), np.zeros((2, 4, 3, 3, 3), np.float32),
                      algo="direct"), ValueError,
     "conv3d: algo='direct' needs a 1x1 kernel or a 1-D/2-D"),
    (lambda: F.conv1d(X, W), ValueError, "conv1d: x must be 3-D"),
    (lambda: F.conv3d(X[0], W), ValueError, r"conv3d: x must be 5-D .* got shape \(4, 6, 6\)"),
    (lambda: F.conv_transpose2d(X, W),
     ValueError, "conv_transpose2d: x has 4 channels but weight"),
    (lambda: F.conv_transpose2d(X, W.transpose(1, 0, 2, 3), stride=2, output_padding=2),
     ValueError, "output_padding must be smaller than either stride or dilation"),
    (lambda: F.conv_transpose2d(X, W.transpose(1, 0, 2, 3), padding="same"), ValueError,
     "conv_transpose2d: padding must be an int or a tuple"),
    (lambda: F.conv_transpose2d(X, W.transpose(1, 0, 2, 3), padding=5), ValueError,
     "conv_transpose2d: the output size"),
    (lambda: F.conv_transpose1d(X, W), ValueError, "conv_transpose1d: x must be 3-D"),
    (lambda: F.unfold(X[0, 0], 2), ValueError, "unfold: x must be 4-D"),
    (lambda: F.unfold(X, 0), ValueError, "unfold: kernel_size must be >= 1"),
    (lambda: F.unfold(X, 2, padding="same"), TypeError, "unfold: padding must be an int"),
    (lambda: F.fold(np.zeros((1, 8, 10), np.float32), (4, 4), 2),
     ValueError, "fold: x has 10 blocks"),
    (lambda: F.fold(np.zeros((1, 7, 9), np.float32), (4, 4), 2),
     ValueError, "fold: x dimension 1"),
    (lambda: F.fold(np.zeros((8, 9), np.float32)[None, None], (4, 4), 2),
     ValueError, "fold: x must be 3-D"),
])
def test_bad_inputs_name_the_operator_and_argument(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_geometry_table_returns_the_checked_result_and_still_refuses_bad_arguments():
    from lezero.functions.conv.geometry import conv_geometry
    first = conv_geometry("conv2d", (2, 3, 8, 8), (4, 3, 3, 3), 2, 1, 1, 1, 1)
    again = conv_geometry("conv2d", (2, 3, 8, 8), (4, 3, 3, 3), 2, 1, 1, 1, 1)
    assert again is first and first.out_size == (8, 8)
    for bad in (True, 0, (1, True), 1.5):       # never answered from the table
        with pytest.raises((TypeError, ValueError), match="stride"):
            conv_geometry("conv2d", (2, 3, 8, 8), (4, 3, 3, 3), 2, bad, 1, 1, 1)
    listed = conv_geometry("conv2d", (2, 3, 8, 8), (4, 3, 3, 3), 2, [2, 2], 1, 1, 1)
    assert listed.out_size == (4, 4)            # an unhashable argument: checked each time
