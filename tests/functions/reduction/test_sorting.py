"""sort and argsort: values and indices against torch.sort/torch.argsort, the gradient of
the values (central differences, PyTorch, double backward), ties, NaN and bad input."""
import numpy as np
import pytest
import torch

import lezero as lz
import lezero.functions as F
from lezero.testing import check_all, check_torch, rand


@pytest.mark.parametrize("axis,descending", [(-1, False), (-1, True), (0, False), (1, True)])
def test_sort_values_gradient_matches_torch(axis, descending):
    x = rand(3, 4, 2, seed=1)

    def lz_fn(a):
        return F.sort(a, axis, descending).values

    def t_fn(t):
        return torch.sort(t, axis, descending).values
    # values are a permutation of x: linear, so check_double_backward's square term matters
    check_all(lz_fn, t_fn, x)
    check_torch(lambda a: F.sort(a, axis, descending), lambda t: torch.sort(t, axis, descending),
                x.astype(np.float32))


def test_sort_gradient_goes_back_to_the_source_positions():
    x = lz.Variable(np.array([3.0, 1.0, 2.0]))
    values, indices = F.sort(x)
    (values * lz.Variable(np.array([10.0, 20.0, 30.0]))).sum().backward()
    np.testing.assert_array_equal(values.data, [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(indices.data, [1, 2, 0])
    np.testing.assert_array_equal(x.grad.data, [30.0, 10.0, 20.0])
    assert not indices.requires_grad and indices.dtype == np.int64


@pytest.mark.parametrize("descending", [False, True])
def test_ties_are_stable_like_torch_stable(descending):
    x = np.array([[2, 1, 2, 0, 1, 2], [5, 5, 5, 4, 4, 6]], np.float32)
    ours = F.sort(x, descending=descending, stable=True)
    ref = torch.sort(torch.tensor(x), descending=descending, stable=True)
    np.testing.assert_array_equal(ours.values.data, ref.values.numpy())
    np.testing.assert_array_equal(ours.indices.data, ref.indices.numpy())
    np.testing.assert_array_equal(F.argsort(x, descending=descending).data, ref.indices.numpy())


@pytest.mark.parametrize("descending", [False, True])
def test_many_ties_stay_in_order(descending):
    # long enough that an unstable sort (NumPy's introsort) would reorder ties
    x = np.random.default_rng(0).integers(0, 3, size=(2, 200)).astype(np.float32)
    ref = torch.sort(torch.tensor(x), descending=descending, stable=True)
    got = F.sort(lz.Variable(x), descending=descending)
    np.testing.assert_array_equal(got.indices.data, ref.indices.numpy())


@pytest.mark.parametrize("descending", [False, True])
def test_nan_sorts_as_the_largest_value(descending):
    x = np.array([1.0, np.nan, -2.0, 3.0])
    ours = F.sort(x, descending=descending)
    ref = torch.sort(torch.tensor(x), descending=descending)
    np.testing.assert_array_equal(ours.values.data, ref.values.numpy())
    np.testing.assert_array_equal(ours.indices.data, ref.indices.numpy())


@pytest.mark.parametrize("dtype", [np.int64, np.uint8, np.bool_])
def test_integer_and_bool_inputs(dtype):
    x = np.array([[3, 0, 2, 1], [1, 1, 0, 3]]).astype(dtype)
    for descending in (False, True):
        ref = torch.sort(torch.tensor(x), descending=descending, stable=True)
        ours = F.sort(x, descending=descending)
        assert ours.values.dtype == dtype
        np.testing.assert_array_equal(ours.values.data, ref.values.numpy())
        np.testing.assert_array_equal(ours.indices.data, ref.indices.numpy())


def test_argsort_matches_torch_and_is_a_constant():
    x = rand(4, 5, seed=3, dtype=np.float32)
    for axis in (0, 1, -1):
        for descending in (False, True):
            got = F.argsort(lz.Variable(x), axis=axis, descending=descending)
            ref = torch.argsort(torch.tensor(x), dim=axis, descending=descending)
            np.testing.assert_array_equal(got.data, ref.numpy())
            assert got.dtype == np.int64 and not got.requires_grad


def test_zero_dim_input_sorts_as_itself():
    x = lz.Variable(np.array(2.5))
    values, indices = F.sort(x)
    values.backward()
    assert values.shape == () and float(values.data) == 2.5 and int(indices.data) == 0
    assert float(x.grad.data) == 1.0
    assert F.argsort(np.array(1.0)).shape == ()
    assert F.sort(np.array(True)).values.dtype == np.bool_


def test_empty_axis():
    values, indices = F.sort(np.ones((2, 0), np.float32))
    assert values.shape == (2, 0) and indices.shape == (2, 0)


@pytest.mark.parametrize("name", ["sort", "argsort"])
@pytest.mark.parametrize("call,exc,match", [
    (lambda f: f(np.ones((2, 3)), axis=2), ValueError, "{}: axis 2 is out of range"),
    (lambda f: f(np.ones((2, 3)), axis=1.0), TypeError, "{}: axis must be an int"),
    (lambda f: f(np.ones((2, 3)), descending="yes"), TypeError, "{}: descending must be a bool"),
    (lambda f: f(np.ones((2, 3)), stable=1), TypeError, "{}: stable must be a bool"),
    (lambda f: f("abc"), TypeError, "{}: x must be"),
])
def test_bad_arguments(name, call, exc, match):
    with pytest.raises(exc, match="^" + match.format(name)):
        call(getattr(F, name))
