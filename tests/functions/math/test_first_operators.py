"""The core's first operators: arithmetic, exp/log/sin/cos/tanh, shapes, sum, matmul."""
import numpy as np
import pytest
import torch

import lezero as lz
import lezero.functions as F
from lezero.testing import check_all, check_torch, rand

BINARY = [
    (F.add, torch.add), (F.sub, torch.sub), (F.mul, torch.mul), (F.div, torch.div),
]
SHAPES = [((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 1, 4), (3, 1)), ((), (2, 3))]


@pytest.mark.parametrize("op,top", BINARY, ids=lambda f: getattr(f, "__name__", ""))
@pytest.mark.parametrize("sa,sb", SHAPES)
def test_binary_broadcasting(op, top, sa, sb):
    a, b = rand(*sa, seed=1), rand(*sb, seed=2, low=0.5, high=2.0)
    check_all(op, top, a, b)


@pytest.mark.parametrize("op,top,low", [
    (F.exp, torch.exp, -1), (F.log, torch.log, 0.2), (F.sin, torch.sin, -3),
    (F.cos, torch.cos, -3), (F.tanh, torch.tanh, -2), (F.neg, torch.neg, -1)])
def test_unary(op, top, low):
    check_all(op, top, rand(3, 5, low=low, high=2.0, seed=3))


def test_pow_scalar_and_tensor_exponent():
    x = rand(3, 4, low=0.5, high=2.0, seed=4)
    check_all(lambda a: F.pow(a, 3), lambda a: torch.pow(a, 3), x)
    check_all(lambda a, c: F.pow(a, c), torch.pow, x, rand(4, low=-1, high=2, seed=5))


@pytest.mark.parametrize("sa,sb", [((3, 4), (4, 5)), ((2, 3, 4), (4, 5)), ((4,), (4, 2)),
                                   ((3, 4), (4,)), ((4,), (4,)), ((2, 1, 3, 4), (5, 4, 2))])
def test_matmul(sa, sb):
    check_all(F.matmul, torch.matmul, rand(*sa, seed=6), rand(*sb, seed=7))


def test_reshape_transpose_broadcast_sum_to():
    x = rand(2, 3, 4, seed=8)
    check_all(lambda a: F.reshape(a, (4, -1)), lambda a: a.reshape(4, -1), x)
    check_all(lambda a: F.transpose(a, (2, 0, 1)), lambda a: a.permute(2, 0, 1), x)
    check_all(lambda a: F.transpose(a), lambda a: a.permute(2, 1, 0), x)
    check_all(lambda a: F.broadcast_to(a, (5, 2, 3, 4)), lambda a: a.expand(5, 2, 3, 4), x)
    check_all(lambda a: F.sum_to(a, (3, 1)), lambda a: a.sum(0).sum(-1, keepdim=True), x)


@pytest.mark.parametrize("axis,keepdims", [(None, False), (1, False), ((0, 2), True), (-1, True)])
def test_sum(axis, keepdims):
    x = rand(2, 3, 4, seed=9)
    tdim = axis if axis is not None else tuple(range(3))
    check_all(lambda a: F.sum(a, axis=axis, keepdims=keepdims),
              lambda a: a.sum(dim=tdim, keepdim=keepdims), x)


@pytest.mark.parametrize("index", [
    (1,), (slice(None), 2), (Ellipsis, slice(1, 3)), ([0, 2, 2, 0],),
    (slice(None), [1, 1, 3]), (np.array([[0, 1], [1, 1]]), slice(None)), (None, 0)])
def test_get_item(index):
    x = rand(3, 4, seed=10)
    check_all(lambda a: a[index], lambda a: a[index], x)


def test_get_item_boolean_mask():
    x = rand(3, 4, seed=11)
    mask = x > 0
    check_all(lambda a: a[mask], lambda a: a[torch.tensor(mask)], x)


def test_bad_inputs_name_the_operator():
    x = lz.Variable(np.ones((2, 3), np.float32))
    with pytest.raises(ValueError, match="reshape"):
        F.reshape(x, (4, 2))
    with pytest.raises(ValueError, match="matmul"):
        F.matmul(x, x)
    with pytest.raises(ValueError, match="sum.*axis 2"):
        F.sum(x, axis=2)
    with pytest.raises(ValueError, match="broadcast_to"):
        F.broadcast_to(x, (3, 3))
    with pytest.raises(ValueError, match="transpose"):
        F.transpose(x, (0, 0))
    with pytest.raises(IndexError, match="get_item"):
        x[5]
    with pytest.raises(TypeError, match="str"):
        F.add(x, "a")


def test_float32_stays_float32_with_python_scalars():
    x = lz.Variable(np.ones(3, np.float32))
    for y in (x + 1.5, 2.0 * x, x / 3, 1 - x, x ** 2.0, 2.0 ** x, -x, x @ x):
        assert y.dtype == np.float32
    y = (x * 2.5).sum()
    y.backward()
    assert x.grad.dtype == np.float32


def test_numpy_array_on_the_left_calls_the_reflected_operator():
    x = lz.Variable(np.ones(3, np.float32))
    y = np.full(3, 2.0, np.float32) * x
    assert isinstance(y, lz.Variable)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.data, [2, 2, 2])


def test_check_torch_runs_on_gpu(xp):
    check_torch(F.tanh, torch.tanh, rand(3, 4, dtype=np.float32), xp=xp)
