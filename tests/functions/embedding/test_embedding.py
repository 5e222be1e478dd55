"""embedding: gradients (scatter-add, padding, frequency scaling), max_norm, torch, errors."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import lezero as lz
import lezero.functions as F
from lezero.testing import check_all, check_double_backward, check_torch, rand

IDX = np.array([[0, 2, 2], [4, 0, 2]])          # repeated indices: their gradients add up


def lookup(idx, **kw):
    return (lambda w: F.embedding(idx, w, **kw),
            lambda w: TF.embedding(torch.tensor(idx), w, **kw))


@pytest.mark.parametrize("idx", [IDX, np.array(3), np.array([1, 1, 1, 1]),
                                 np.array([[[0, 1], [1, 3]], [[4, 4], [2, 0]]])],
                         ids=["2d", "0d", "1d-repeated", "3d"])
def test_lookup(idx):
    check_all(*lookup(idx), rand(5, 3, seed=1))


@pytest.mark.parametrize("kw", [{"padding_idx": 2}, {"padding_idx": -1},
                                {"scale_grad_by_freq": True},
                                {"padding_idx": 0, "scale_grad_by_freq": True}],
                         ids=["pad2", "pad-1", "freq", "pad0-freq"])
def test_padding_and_frequency_scaling(kw):
    # These change the gradient on purpose (it is no longer the derivative of the
    # forward), so central differences do not apply; PyTorch defines the semantics.
    fn, tfn = lookup(IDX, **kw)
    check_torch(fn, tfn, rand(5, 3, dtype=np.float32, seed=2))
    # Squaring makes the first-order gradient depend on the weight, so double backward
    # runs EmbeddingGrad's own backward: it must be the derivative of the (scaled)
    # first-order gradient, and equal PyTorch's second-order gradient.
    square, tsquare = (lambda w: fn(w) * fn(w)), (lambda w: tfn(w) * tfn(w))
    check_double_backward(square, rand(5, 3, seed=3))
    check_torch(square, tsquare, rand(5, 3, dtype=np.float32, seed=3))
    w, gy, gg = rand(5, 3, seed=4), rand(2, 3, 3, seed=5), rand(5, 3, seed=6)
    v = lz.Variable(w)
    (g,) = lz.grad(square(v), [v], grad_outputs=gy, create_graph=True)
    (gg_lz,) = lz.grad((g * gg).sum(), [v])
    t = torch.tensor(w, requires_grad=True)
    (gt,) = torch.autograd.grad(tsquare(t), [t], grad_outputs=torch.tensor(gy), create_graph=True)
    (gg_t,) = torch.autograd.grad((gt * torch.tensor(gg)).sum(), [t])
    np.testing.assert_allclose(gg_lz.data, gg_t.numpy(), rtol=1e-10)
    assert np.abs(gg_lz.data).max() > 0.1


def test_nonlinear_use_exercises_the_gradient_of_the_gradient():
    fn, tfn = lookup(IDX)
    check_all(lambda w: fn(w) * fn(w), lambda w: tfn(w) * tfn(w), rand(5, 3, seed=3))


def test_gradient_scatter_adds_and_skips_padding():
    w = lz.Variable(np.zeros((5, 2), np.float32))
    y = F.embedding(IDX, w, padding_idx=4)
    y.backward(grad=np.ones((2, 3, 2), np.float32))
    # index 0 used twice, 2 three times, 4 is padding, 1 and 3 unused
    np.testing.assert_array_equal(w.grad.data[:, 0], [2, 0, 3, 0, 0])
    assert w.grad.dtype == np.float32 and y.dtype == np.float32 and y.shape == (2, 3, 2)


def test_padding_row_value_is_still_returned():
    w = rand(5, 3, dtype=np.float32, seed=4)
    y = F.embedding(np.array([1, 4]), w, padding_idx=4)
    np.testing.assert_array_equal(y.data, w[[1, 4]])


@pytest.mark.parametrize("norm_type", [2.0, 1.0])
def test_max_norm_renormalises_rows_in_place_like_torch(norm_type):
    w = rand(5, 3, dtype=np.float32, seed=5, low=-2, high=2)
    w_torch = w.copy()
    check_torch(lambda v: F.embedding(IDX, v, max_norm=1.0, norm_type=norm_type),
                lambda t: TF.embedding(torch.tensor(IDX), t, max_norm=1.0, norm_type=norm_type),
                w)
    ours = lz.Variable(w.copy())
    F.embedding(IDX, ours, max_norm=1.0, norm_type=norm_type)
    theirs = torch.tensor(w_torch)
    TF.embedding(torch.tensor(IDX), theirs, max_norm=1.0, norm_type=norm_type)
    np.testing.assert_allclose(ours.data, theirs.numpy(), rtol=1e-6)
    norms = np.linalg.norm(ours.data, ord=norm_type, axis=1)
    assert np.all(norms[[0, 2, 4]] <= 1.0 + 1e-6)
    np.testing.assert_array_equal(ours.data[[1, 3]], w[[1, 3]])   # rows not looked up


@pytest.mark.parametrize("call,err,match", [
    (lambda w: F.embedding(np.array([0, 7, 1]), w), ValueError,
     r"embedding: index 7 is out of range for a weight with 5 rows"),
    (lambda w: F.embedding(np.array([[0, -1]]), w), ValueError, r"embedding: index -1 is out"),
    (lambda w: F.embedding(np.array([0.0, 1.0]), w), TypeError,
     r"embedding: input must hold integer indices, got dtype float64"),
    (lambda w: F.embedding([0, 1], w), TypeError, r"embedding: input must be a Variable.*list"),
    (lambda w: F.embedding(np.array([0]), w[0]), ValueError,
     r"embedding: weight must be 2-D.*got shape \(3,\)"),
    (lambda w: F.embedding(np.array([0]), np.ones((5, 3), np.int32)), TypeError,
     r"embedding: weight must be floating point"),
    (lambda w: F.embedding(np.array([0]), w, padding_idx=5), ValueError,
     r"embedding: padding_idx 5 is out of range"),
    (lambda w: F.embedding(np.array([0]), w, padding_idx=-6), ValueError, r"padding_idx -6"),
    (lambda w: F.embedding(np.array([0]), w, padding_idx=1.0), TypeError, r"padding_idx"),
    (lambda w: F.embedding(np.array([0]), w, max_norm=-1.0), ValueError, r"max_norm"),
    (lambda w: F.embedding(np.array([0]), w, max_norm="1"), TypeError, r"max_norm.*str"),
    (lambda w: F.embedding(np.array([0]), w, sparse=True), ValueError, r"sparse"),
    (lambda w: F.embedding(np.array([0]), w, sparse="no"), TypeError,
     r"embedding: sparse must be a bool, got str"),
])
def test_bad_inputs(call, err, match):
    w = lz.Variable(np.ones((5, 3), np.float32))
    with pytest.raises(err, match=match):
        call(w)
    np.testing.assert_array_equal(w.data, 1)       # nothing was modified before raising


def test_embedding_on_gpu(xp):
    w = lz.Variable(xp.asarray(rand(5, 3, dtype=np.float32, seed=6)))
    y = F.embedding(xp.asarray(IDX), w, padding_idx=2, scale_grad_by_freq=True)
    y.backward(grad=xp.ones((2, 3, 3), dtype=np.float32))
    t = torch.tensor(lz.cuda.as_numpy(w.data), requires_grad=True)
    TF.embedding(torch.tensor(IDX), t, padding_idx=2, scale_grad_by_freq=True).sum().backward()
    np.testing.assert_allclose(lz.cuda.as_numpy(w.grad.data), t.grad.numpy(), rtol=1e-6)
