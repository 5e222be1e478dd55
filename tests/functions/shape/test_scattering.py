"""scatter (torch.scatter, out of place): forward and gradients against PyTorch, central
differences, double backward, a number as src, reduce='add', and bad input."""
import numpy as np
import pytest
import torch

import lezero as lz
import lezero.functions as F
from lezero.functions.shape.index import IndexOutOfRangeError
from lezero.testing import check_all, check_double_backward, check_gradient, check_torch, rand

# Indices unique along the scatter axis (so which write wins is defined), and a src
# larger than the index in some dims (only its leading block is used).
IDX1 = np.array([[3, 0], [1, 2], [0, 3]])          # axis 1 of a (3, 4) x
IDX0 = np.array([[2, 0, 1, 2], [0, 1, 2, 0]])      # axis 0 of a (3, 4) x


@pytest.mark.parametrize("axis,index,src_shape", [(1, IDX1, (3, 2)), (0, IDX0, (2, 4)),
                                                  (-2, IDX0[:, :3], (2, 3))])
def test_scatter_matches_torch(axis, index, src_shape):
    x, src = rand(3, 4, seed=1), rand(*src_shape, seed=2)

    def lz_fn(a, s):
        return F.scatter(a, axis, index, s)

    def t_fn(a, s):
        return torch.scatter(a, axis, torch.tensor(index), s)
    check_all(lz_fn, t_fn, x, src)


def test_src_larger_than_index_uses_its_leading_block():
    # torch.scatter's forward allows it, its backward does not: compare the forward only
    x, src = rand(3, 4, seed=8), rand(3, 4, seed=9)
    y = F.scatter(x, 0, IDX0[:, :3], src)
    ref = torch.scatter(torch.tensor(x), 0, torch.tensor(IDX0[:, :3]), torch.tensor(src))
    np.testing.assert_array_equal(y.data, ref.numpy())
    check_gradient(lambda a, s: F.scatter(a, 1, IDX1[:2], s), x, src)
    check_double_backward(lambda a, s: F.scatter(a, 1, IDX1[:2], s), x, src)


def test_gradients_by_hand():
    x = lz.Variable(np.ones((2, 3)))
    src = lz.Variable(np.array([[5.0, 6.0], [7.0, 8.0]]))
    y = F.scatter(x, 1, np.array([[2, 0], [1, 1]]), src)
    np.testing.assert_array_equal(y.data, [[6, 1, 5], [1, 8, 1]])   # the last repeat wins
    (y * lz.Variable(np.arange(6.0).reshape(2, 3))).sum().backward()
    np.testing.assert_array_equal(x.grad.data, [[0, 1, 0], [3, 0, 5]])
    np.testing.assert_array_equal(src.grad.data, [[2, 0], [4, 4]])   # torch: gather of gy


def test_three_dims_and_float32_parity():
    index = np.stack([np.stack([np.random.default_rng(k + 3 * j).permutation(4)[:2]
                                for j in range(3)], 1) for k in range(2)])   # (2, 2, 3)
    x, src = rand(2, 4, 3, seed=3, dtype=np.float32), rand(2, 2, 3, seed=4, dtype=np.float32)
    check_torch(lambda a, s: F.scatter(a, 1, index, s),
                lambda a, s: torch.scatter(a, 1, torch.tensor(index), s), x, src)


def test_number_src_fills_and_only_x_gets_a_gradient():
    x = rand(3, 4, seed=5)
    check_all(lambda a: F.scatter(a, 1, IDX1, 2.5),
              lambda a: torch.scatter(a, 1, torch.tensor(IDX1), 2.5), x)
    y = F.scatter(x.astype(np.float32), 0, IDX0, -1)
    assert y.dtype == np.float32
    np.testing.assert_array_equal(y.data, torch.scatter(torch.tensor(x, dtype=torch.float32),
                                                        0, torch.tensor(IDX0), -1.0).numpy())


def test_reduce_add_is_scatter_add():
    x, src = rand(3, 4, seed=6), rand(3, 2, seed=7)
    index = np.array([[1, 1], [0, 3], [2, 2]])      # repeats add up
    check_all(lambda a, s: F.scatter(a, 1, index, s, reduce="add"),
              lambda a, s: torch.scatter_add(a, 1, torch.tensor(index), s), x, src)


def test_integer_input():
    x = np.zeros((2, 3), np.int64)
    y = F.scatter(x, 1, np.array([[2], [0]]), np.array([[7], [9]]))
    np.testing.assert_array_equal(y.data, [[0, 0, 7], [9, 0, 0]])
    np.testing.assert_array_equal(x, 0)              # out of place


X = np.zeros((3, 4))


@pytest.mark.parametrize("call,exc,match", [
    (lambda: F.scatter(X, 2, IDX1, X), ValueError, "scatter: axis 2 is out of range"),
    (lambda: F.scatter(X, 1, IDX1 + 1, X), IndexOutOfRangeError, "scatter: index holds 4"),
    (lambda: F.scatter(X, 1, IDX1.astype(float), X), TypeError, "scatter: index must hold int"),
    (lambda: F.scatter(X, 1, IDX1[0], X), ValueError, "scatter: index must have as many dims"),
    (lambda: F.scatter(X, 1, IDX1, np.ones((3, 1))), ValueError,
     r"scatter: src shape \(3, 1\) must be at least index shape \(3, 2\)"),
    (lambda: F.scatter(X, 1, IDX1, X.astype(np.float32)), TypeError,
     "scatter: src dtype float32 differs from x dtype float64"),
    (lambda: F.scatter(X, 1, IDX1, "a"), TypeError, "scatter: src must be a Variable"),
    (lambda: F.scatter([1.0], 0, [0], X), TypeError, "scatter: x must be a Variable"),
    (lambda: F.scatter(X, 1, IDX1, X, reduce="multiply"), ValueError,
     "scatter: reduce must be one of 'add', got 'multiply'"),
    (lambda: F.scatter(X, 1, IDX1, X, reduce=1), TypeError, "scatter: reduce must be one of"),
])
def test_bad_arguments(call, exc, match):
    with pytest.raises(exc, match="^" + match):
        call()
