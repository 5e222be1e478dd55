"""cosine_similarity and pairwise_distance: central differences, double backward, PyTorch
parity (broadcasting, eps placement, every p), bad inputs."""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import lezero as lz
import lezero.functions as F
from lezero.functions import registry
from lezero.testing import check_all, check_gradient, check_torch, rand

# ----- cosine_similarity ---------------------------------------------------------------

# (x1 shape, x2 shape, axis): equal shapes, broadcasting either way, negative axes.
COSINE = [((3, 4), (3, 4), 1), ((3, 4), (3, 4), 0), ((2, 3, 4), (2, 3, 4), -1),
          ((3, 4), (4,), 1), ((4,), (3, 4), -1), ((2, 1, 4), (3, 1), 0), ((5,), (5,), 0)]


@pytest.mark.parametrize("s1,s2,axis", COSINE, ids=[f"{a}-{b}-{c}" for a, b, c in COSINE])
def test_cosine_similarity(s1, s2, axis):
    x1, x2 = rand(*s1, seed=1), rand(*s2, seed=2)
    check_all(lambda a, b: F.cosine_similarity(a, b, axis=axis),
              lambda a, b: TF.cosine_similarity(a, b, dim=axis), x1, x2)


def test_cosine_similarity_default_axis_is_1():
    x1, x2 = rand(3, 5, 2, seed=3), rand(3, 5, 2, seed=4)
    check_torch(F.cosine_similarity, TF.cosine_similarity,
                x1.astype(np.float32), x2.astype(np.float32))
    assert F.cosine_similarity(x1, x2).shape == (3, 2)


def test_cosine_similarity_clamps_each_norm_by_eps_as_torch():
    # ||a|| = 1e-5 and ||b|| = 1e-5: each above eps = 1e-8, so the result is exactly 1
    # (clamping the product of the norms by eps would give 0.01); ||c|| = 1e-9 is below
    # eps and is replaced by it.
    a = np.array([[1e-5, 0.0], [1e-9, 0.0], [0.0, 0.0]])
    b = np.array([[1e-5, 0.0], [1.0, 0.0], [1.0, 2.0]])
    y = F.cosine_similarity(a, b).data
    np.testing.assert_allclose(y, TF.cosine_similarity(torch.tensor(a), torch.tensor(b)).numpy(),
                               rtol=1e-12)
    np.testing.assert_allclose(y, [1.0, 0.1, 0.0], rtol=1e-12)
    y = F.cosine_similarity(a, b, eps=1e-4).data
    np.testing.assert_allclose(y, TF.cosine_similarity(torch.tensor(a), torch.tensor(b),
                                                       eps=1e-4).numpy(), rtol=1e-12)


def test_cosine_similarity_gradient_below_eps_is_that_of_the_clamped_value():
    # Below eps the clamped norm is a constant: central differences agree (PyTorch's
    # backward differentiates the unclamped norm there, see lezero/functions/linalg/distance.py).
    # (eps = 0.1 and ||a[0]|| = 2.2e-3 leave room for the differences' steps of 1e-6.)
    a = np.array([[1e-3, 2e-3], [0.3, -0.2]])
    b = np.array([[1.0, 3.0], [0.5, 0.1]])
    check_gradient(lambda u, v: F.cosine_similarity(u, v, eps=0.1), a, b)


def test_cosine_similarity_of_a_zero_vector_matches_torch_with_gradients():
    a = np.array([[0.0, 0.0, 0.0], [1.0, -2.0, 0.5]], np.float32)
    b = rand(2, 3, dtype=np.float32, seed=5)
    check_torch(F.cosine_similarity, TF.cosine_similarity, a, b)


def test_cosine_similarity_stays_in_range_for_large_values():
    x = np.full((2, 8), 1e30, np.float32)
    y = F.cosine_similarity(x, x).data
    assert y.dtype == np.float32 and np.all(np.abs(y - 1) < 1e-6)


# ----- pairwise_distance ---------------------------------------------------------------

PAIRWISE = [((3, 4), (3, 4)), ((3, 4), (4,)), ((4,), (3, 4)), ((2, 1, 4), (3, 4)),
            ((5,), (5,))]
NORMS = [2.0, 1.0, 3.0, 0.5, math.inf, -math.inf, -1.0, -2.5]


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("s1,s2", PAIRWISE, ids=[f"{a}-{b}" for a, b in PAIRWISE])
def test_pairwise_distance_shapes(s1, s2, keepdim):
    x1, x2 = rand(*s1, seed=6), rand(*s2, seed=7)
    check_all(lambda a, b: F.pairwise_distance(a, b, keepdim=keepdim),
              lambda a, b: TF.pairwise_distance(a, b, keepdim=keepdim), x1, x2)


@pytest.mark.parametrize("p", NORMS, ids=str)
def test_pairwise_distance_every_p(p):
    x1, x2 = rand(3, 5, seed=8), rand(3, 5, seed=9)
    # p < 1 and the inf norms have kinks where entries tie or vanish; random data avoids
    # both.  The inf norms' second derivative is zero, the others' is smooth here.
    check_all(lambda a, b: F.pairwise_distance(a, b, p=p),
              lambda a, b: TF.pairwise_distance(a, b, p=p), x1, x2, rtol=2e-4)


def test_pairwise_distance_p0_counts_nonzeros_with_zero_gradient():
    x1 = np.array([[1.0, 2.0, 0.0]], np.float32)
    x2 = np.array([[0.0, 2.0, 3.0]], np.float32)
    check_torch(lambda a, b: F.pairwise_distance(a, b, p=0),
                lambda a, b: TF.pairwise_distance(a, b, p=0), x1, x2)
    # eps is added to the difference, so 2 - 2 + eps is not zero
    np.testing.assert_array_equal(F.pairwise_distance(x1, x2, p=0).data, [3.0])
    np.testing.assert_array_equal(F.pairwise_distance(x1, x2, p=0, eps=0).data, [2.0])


def test_pairwise_distance_adds_eps_to_the_difference():
    x = np.zeros((2, 4))
    np.testing.assert_allclose(F.pairwise_distance(x, x).data, [2e-6, 2e-6], rtol=1e-12)
    np.testing.assert_allclose(F.pairwise_distance(x, x, p=1, eps=0.5).data, [2.0, 2.0])
    check_torch(lambda a, b: F.pairwise_distance(a, b, eps=-0.25),
                lambda a, b: TF.pairwise_distance(a, b, eps=-0.25),
                rand(3, 4, dtype=np.float32, seed=10), rand(3, 4, dtype=np.float32, seed=11))


@pytest.mark.parametrize("keepdim", [False, True])
def test_pairwise_distance_of_0_dim_inputs(keepdim):
    a, b = np.array(1.5, np.float32), np.array(-0.5, np.float32)
    check_torch(lambda u, v: F.pairwise_distance(u, v, keepdim=keepdim),
                lambda u, v: TF.pairwise_distance(u, v, keepdim=keepdim), a, b)
    check_all(lambda u, v: F.pairwise_distance(u, v, p=3, keepdim=keepdim),
              lambda u, v: TF.pairwise_distance(u, v, p=3, keepdim=keepdim),
              np.array(0.7), np.array(-0.4))


def test_pairwise_distance_is_overflow_safe_in_float32():
    x1 = np.full((1, 4), 1e30, np.float32)
    y = F.pairwise_distance(x1, -x1).data
    np.testing.assert_allclose(y, [4e30], rtol=1e-6)


# ----- both ------------------------------------------------------------------------------

@pytest.mark.parametrize("op", [F.cosine_similarity, F.pairwise_distance])
def test_float32_in_float32_out_and_constants(op):
    a, b = rand(3, 4, dtype=np.float32, seed=12), rand(3, 4, dtype=np.float32, seed=13)
    assert not op(a, b).requires_grad
    v = lz.Variable(a)
    y = op(v, b)
    y.backward(grad=np.ones(y.shape, np.float32))
    assert y.dtype == np.float32 and v.grad.dtype == np.float32 and v.grad.shape == (3, 4)


def test_registered_as_linalg():
    for name in ("cosine_similarity", "pairwise_distance"):
        info = registry.REGISTRY[name]
        assert info.category == "linalg" and info.fn is getattr(F, name)


X = np.ones((2, 3), np.float32)


@pytest.mark.parametrize("call,err,match", [
    (lambda: F.cosine_similarity(X, np.ones((2, 3), np.int64)), TypeError,
     r"cosine_similarity: x2 must be floating point, got dtype int64"),
    (lambda: F.cosine_similarity("a", X), TypeError, r"cosine_similarity: x1 must be a Variable"),
    (lambda: F.cosine_similarity(X, np.ones((2, 3))), TypeError,
     r"cosine_similarity: x2 dtype float64 differs from x1 dtype float32"),
    (lambda: F.cosine_similarity(X, np.ones((4, 3), np.float32)), ValueError,
     r"cosine_similarity: x1 of shape \(2, 3\) and x2 of shape \(4, 3\) do not broadcast"),
    (lambda: F.cosine_similarity(X, X, axis=2), ValueError,
     r"cosine_similarity: axis 2 is out of range"),
    (lambda: F.cosine_similarity(X[0], X[0]), ValueError,
     r"cosine_similarity: axis 1 is out of range for an input with 1 dims"),
    (lambda: F.cosine_similarity(X, X, axis=1.0), TypeError,
     r"cosine_similarity: axis must be an int"),
    (lambda: F.cosine_similarity(X, X, eps="1"), TypeError,
     r"cosine_similarity: eps must be a real number"),
    (lambda: F.cosine_similarity(X, X, eps=-1e-8), ValueError,
     r"cosine_similarity: eps must be non-negative"),
    (lambda: F.cosine_similarity(X[0, 0, ...], X[1, 1, ...], axis=0), ValueError,
     r"cosine_similarity: inputs must have at least 1 dim"),
    (lambda: F.pairwise_distance(X, [1.0, 2.0, 3.0]), TypeError,
     r"pairwise_distance: x2 must be a Variable or an ndarray, got list"),
    (lambda: F.pairwise_distance(X, np.ones((2, 4), np.float32)), ValueError,
     r"pairwise_distance: x1 of shape \(2, 3\) and x2 of shape \(2, 4\)"),
    (lambda: F.pairwise_distance(X, X, p="2"), TypeError,
     r"pairwise_distance: p must be a real number"),
    (lambda: F.pairwise_distance(X, X, p=float("nan")), ValueError,
     r"pairwise_distance: p must be a number or \+-inf, got nan"),
    (lambda: F.pairwise_distance(X, X, eps=None), TypeError,
     r"pairwise_distance: eps must be a real number"),
    (lambda: F.pairwise_distance(X, X, keepdim=1), TypeError,
     r"pairwise_distance: keepdim must be a bool"),
])
def test_bad_inputs(call, err, match):
    with pytest.raises(err, match=match):
        call()


def test_on_gpu(xp):
    a, b = rand(3, 4, dtype=np.float32, seed=14), rand(4, dtype=np.float32, seed=15)
    check_torch(F.cosine_similarity, TF.cosine_similarity, a, b, xp=xp)
    check_torch(lambda u, v: F.pairwise_distance(u, v, p=3.0, keepdim=True),
                lambda u, v: TF.pairwise_distance(u, v, p=3.0, keepdim=True), a, b, xp=xp)
