"""embedding_bag: modes, offsets, padding, per-sample weights, max_norm, gradients, errors."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import lezero as lz
import lezero.functions as F
from lezero.testing import check_double_backward, check_gradient, check_torch, rand

FLAT = np.array([2, 2, 1, 2, 5, 2, 2, 0])      # repeated indices, 2 is used for padding below
OFFSETS = np.array([0, 2, 2, 5])                # bags [2, 2], [], [1, 2, 5], [2, 2, 0]
GRID = np.array([[0, 3, 3], [5, 1, 0]])          # two bags of three


def bag(idx, offsets=None, **kw):
    """(ours, torch's) embedding_bag of ``idx`` as functions of (weight[, psw])."""
    t_idx = torch.tensor(idx)
    t_off = None if offsets is None else torch.tensor(offsets)

    def ours(w, psw=None):
        return F.embedding_bag(idx, w, offsets, per_sample_weights=psw, **kw)

    def theirs(w, psw=None):
        return TF.embedding_bag(t_idx, w, t_off, per_sample_weights=psw, **kw)
    return ours, theirs


CASES = {
    "1d": (FLAT, OFFSETS, {}),
    "2d": (GRID, None, {}),
    "last-offset": (FLAT, np.array([0, 2, 2, 5, 8]), {"include_last_offset": True}),
    "pad": (FLAT, OFFSETS, {"padding_idx": 2}),
    "pad-negative-2d": (GRID, None, {"padding_idx": -1}),
    "pad-last-offset": (FLAT, np.array([0, 3, 8]), {"padding_idx": 2,
                                                    "include_last_offset": True}),
    "empty-bags": (np.array([4, 1]), np.array([0, 0, 2, 2]), {}),
}


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("case", list(CASES))
def test_matches_torch_and_central_differences(case, mode):
    idx, offsets, kw = CASES[case]
    ours, theirs = bag(idx, offsets, mode=mode, **kw)
    check_torch(ours, theirs, rand(6, 3, dtype=np.float32, seed=1))
    # Max mode is piecewise linear: fine away from ties, which random data avoids.
    check_gradient(ours, rand(6, 3, seed=2))


@pytest.mark.parametrize("case", ["1d", "2d", "pad", "last-offset", "empty-bags"])
def test_per_sample_weights(case):
    idx, offsets, kw = CASES[case]
    ours, theirs = bag(idx, offsets, mode="sum", **kw)
    w, psw = rand(6, 3, seed=3), rand(*idx.shape, seed=4)
    check_torch(ours, theirs, w.astype(np.float32), psw.astype(np.float32))
    check_gradient(ours, w, psw)
    # Bilinear in (weight, psw): the cross second derivatives are not zero.
    check_double_backward(ours, w, psw)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_double_backward(mode):
    ours, theirs = bag(FLAT, OFFSETS, mode=mode, padding_idx=5)
    w = lz.Variable(rand(6, 3, seed=5))
    if mode != "max":
        # Linear in the weight: the gradient does not depend on it (second derivative 0)...
        (g,) = lz.grad(ours(w), [w], grad_outputs=rand(4, 3, seed=6), create_graph=True)
        assert not g.requires_grad
    # ... but it is linear in the upstream gradient, through the gradient's own backward.
    def weight_grad(gy):
        return lz.grad(ours(w), [w], grad_outputs=[gy], create_graph=True)[0]
    check_gradient(weight_grad, rand(4, 3, seed=6))
    # Squared, the first-order gradient depends on the weight (through every backward).
    square, tsquare = (lambda w: ours(w) * ours(w)), (lambda w: theirs(w) * theirs(w))
    check_double_backward(square, rand(6, 3, seed=7))
    check_torch(square, tsquare, rand(6, 3, dtype=np.float32, seed=7))


def test_per_sample_weights_double_backward_through_squares():
    ours, _ = bag(GRID, mode="sum")
    fn = (lambda w, psw: ours(w, psw) ** 2)
    check_double_backward(fn, rand(6, 3, seed=8), rand(2, 3, seed=9))


def test_mean_divides_by_non_padding_count_and_empty_bags_are_zero():
    w = lz.Variable(np.arange(18, dtype=np.float32).reshape(6, 3))
    y = F.embedding_bag(FLAT, w, OFFSETS, mode="mean", padding_idx=2)
    np.testing.assert_array_equal(y.data[0], 0)            # only padding: empty
    np.testing.assert_array_equal(y.data[1], 0)            # empty
    np.testing.assert_allclose(y.data[2], (w.data[1] + w.data[5]) / 2)
    np.testing.assert_allclose(y.data[3], w.data[0])
    y.backward(grad=np.ones((4, 3), np.float32))
    np.testing.assert_allclose(w.grad.data[:, 0], [1, 0.5, 0, 0, 0, 0.5])
    assert y.dtype == np.float32 and w.grad.dtype == np.float32


def test_max_gradient_goes_to_the_row_that_gave_the_maximum():
    w = lz.Variable(np.array([[0., 5.], [3., 1.], [2., 2.]], np.float32))
    y = F.embedding_bag(np.array([[0, 1, 2]]), w, mode="max")
    np.testing.assert_array_equal(y.data, [[3., 5.]])
    y.backward(grad=np.array([[10., 20.]], np.float32))
    np.testing.assert_array_equal(w.grad.data, [[0, 20], [10, 0], [0, 0]])


def test_scale_grad_by_freq_divides_by_the_index_count():
    # PyTorch's CPU embedding_bag divides some rows by the wrong count
    # (pytorch/pytorch#190063), so the reference is F.embedding's documented rule:
    # each use of a row contributes its bag's gradient divided by the row's count.
    idx, offsets = np.array([0, 0, 1, 0, 3, 3]), np.array([0, 2, 4])
    for mode in ("sum", "mean"):
        w = rand(6, 3, dtype=np.float32, seed=10)
        gy = rand(3, 3, dtype=np.float32, seed=11)
        v = lz.Variable(w)
        F.embedding_bag(idx, v, offsets, mode=mode, scale_grad_by_freq=True).backward(grad=gy)
        t = torch.tensor(w, requires_grad=True)
        bag_of = torch.tensor([0, 0, 1, 1, 2, 2])
        rows = TF.embedding(torch.tensor(idx), t, scale_grad_by_freq=True)
        if mode == "mean":
            rows = rows / 2
        torch.zeros(3, 3).index_add(0, bag_of, rows).backward(torch.tensor(gy))
        np.testing.assert_allclose(v.grad.data, t.grad.numpy(), rtol=1e-6)
    # Where every index occurs equally often, PyTorch's kernel is right: compare directly.
    ours, theirs = bag(np.array([1, 1, 4, 4, 0, 0]), np.array([0, 3]), mode="mean",
                       scale_grad_by_freq=True)
    check_torch(ours, theirs, rand(6, 3, dtype=np.float32, seed=12))


@pytest.mark.parametrize("norm_type", [2.0, 1.0])
def test_max_norm_renormalises_rows_in_place_like_torch(norm_type):
    w = rand(6, 3, dtype=np.float32, seed=13, low=-2, high=2)
    ours, theirs = bag(FLAT, OFFSETS, mode="mean", max_norm=1.0, norm_type=norm_type)
    check_torch(ours, theirs, w)
    mine, torch_w = lz.Variable(w.copy()), torch.tensor(w)
    ours(mine)
    theirs(torch_w)
    np.testing.assert_allclose(mine.data, torch_w.numpy(), rtol=1e-6)
    np.testing.assert_array_equal(mine.data[[3, 4]], w[[3, 4]])      # rows not looked up


def test_large_bags_match_torch():
    rng = np.random.default_rng(14)
    idx = rng.integers(0, 50, 2000)
    offsets = np.concatenate([[0], np.sort(rng.integers(0, 2000, 99))])
    w, psw = rand(50, 16, dtype=np.float32, seed=15), rand(2000, dtype=np.float32, seed=16)
    for mode in ("sum", "mean", "max"):
        ours, theirs = bag(idx, offsets, mode=mode, padding_idx=7)
        check_torch(ours, theirs, w)
    ours, theirs = bag(idx, offsets, mode="sum")
    check_torch(ours, theirs, w, psw)


W = np.ones((6, 3), np.float32)


@pytest.mark.parametrize("call,err,match", [
    (lambda w: F.embedding_bag(FLAT, w, np.array([1, 4])), ValueError,
     r"embedding_bag: offsets\[0\] must be 0.*got 1"),
    (lambda w: F.embedding_bag(FLAT, w, np.array([0, 4, 2])), ValueError,
     r"embedding_bag: offsets must be non-decreasing"),
    (lambda w: F.embedding_bag(FLAT, w, np.array([0, 9])), ValueError,
     r"embedding_bag: offsets\[-1\] is 9, beyond the input's length 8"),
    (lambda w: F.embedding_bag(FLAT, w, np.array([[0, 2]])), ValueError,
     r"embedding_bag: offsets must be a non-empty 1-D array"),
    (lambda w: F.embedding_bag(FLAT, w, np.array([0.0, 2.0])), TypeError,
     r"embedding_bag: offsets must hold integers"),
    (lambda w: F.embedding_bag(FLAT, w), ValueError, r"embedding_bag: offsets are required"),
    (lambda w: F.embedding_bag(GRID, w, np.array([0, 1])), ValueError,
     r"embedding_bag: offsets must be None for a 2-D input"),
    (lambda w: F.embedding_bag(FLAT, w, np.array([0]), include_last_offset=True), ValueError,
     r"embedding_bag: with include_last_offset=True, offsets need at least 2"),
    (lambda w: F.embedding_bag(GRID, w, mode="mean", per_sample_weights=np.ones((2, 3))),
     ValueError, r"embedding_bag: per_sample_weights are only supported with mode='sum'"),
    (lambda w: F.embedding_bag(GRID, w, mode="sum", per_sample_weights=np.ones(6, np.float32)),
     ValueError, r"embedding_bag: per_sample_weights must have the input's shape"),
    (lambda w: F.embedding_bag(GRID, w, mode="sum", per_sample_weights=np.ones((2, 3))),
     TypeError, r"embedding_bag: per_sample_weights must have the weight's dtype float32"),
    (lambda w: F.embedding_bag(GRID.astype(float), w), TypeError,
     r"embedding_bag: input must hold integer indices, got dtype float64"),
    (lambda w: F.embedding_bag(GRID[None], w), ValueError,
     r"embedding_bag: input must be 1-D .* or 2-D .*got shape \(1, 2, 3\)"),
    (lambda w: F.embedding_bag(np.array(3), w), ValueError, r"embedding_bag: input must be 1-D"),
    (lambda w: F.embedding_bag([[0, 1]], w), TypeError, r"embedding_bag: input must be a"),
    (lambda w: F.embedding_bag(GRID, w, mode="median"), ValueError,
     r"embedding_bag: mode must be 'sum', 'mean' or 'max', got 'median'"),
    (lambda w: F.embedding_bag(GRID, w, mode=None), TypeError, r"embedding_bag: mode must be a str"),
    (lambda w: F.embedding_bag(np.array([[0, 6]]), w), ValueError,
     r"embedding_bag: index 6 in input is out of range for a weight with 6 rows"),
    (lambda w: F.embedding_bag(np.array([[-1, 0]]), w), ValueError, r"embedding_bag: index -1"),
    (lambda w: F.embedding_bag(GRID, w[0]), ValueError, r"embedding_bag: weight must be 2-D"),
    (lambda w: F.embedding_bag(GRID, w, padding_idx=6), ValueError,
     r"embedding_bag: padding_idx 6 is out of range"),
    (lambda w: F.embedding_bag(GRID, w, padding_idx=1.0), TypeError, r"embedding_bag: padding_idx"),
    (lambda w: F.embedding_bag(GRID, w, max_norm=0.0), ValueError, r"embedding_bag: max_norm"),
    (lambda w: F.embedding_bag(GRID, w, mode="max", scale_grad_by_freq=True), ValueError,
     r"embedding_bag: scale_grad_by_freq is not supported with mode='max'"),
    (lambda w: F.embedding_bag(GRID, w, sparse=True), ValueError, r"embedding_bag: sparse"),
    (lambda w: F.embedding_bag(GRID, w, include_last_offset=1), TypeError,
     r"embedding_bag: include_last_offset must be a bool"),
])
def test_bad_inputs(call, err, match):
    w = lz.Variable(W.copy())
    with pytest.raises(err, match=match):
        call(w)
    np.testing.assert_array_equal(w.data, 1)       # nothing was modified before raising


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_on_gpu(xp, mode):
    w = rand(6, 3, dtype=np.float32, seed=17)
    v = lz.Variable(xp.asarray(w))
    y = F.embedding_bag(xp.asarray(FLAT), v, xp.asarray(OFFSETS), mode=mode, padding_idx=5)
    gy = rand(4, 3, dtype=np.float32, seed=18)
    y.backward(grad=xp.asarray(gy))
    t = torch.tensor(w, requires_grad=True)
    yt = TF.embedding_bag(torch.tensor(FLAT), t, torch.tensor(OFFSETS), mode=mode, padding_idx=5)
    yt.backward(torch.tensor(gy))
    np.testing.assert_allclose(lz.cuda.as_numpy(y.data), yt.detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(lz.cuda.as_numpy(v.grad.data), t.grad.numpy(), rtol=1e-6)
