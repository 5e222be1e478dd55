"""The classification margin losses -- soft_margin_loss, multilabel_soft_margin_loss,
multi_margin_loss, multilabel_margin_loss: central differences (float64), double backward,
PyTorch parity of forward and backward (float32) for every reduction and option, and bad
inputs.

The hinges have kinks where ``margin - x[y] + x[i]`` (or ``1 - x[j] + x[i]``) is 0; the
test points are checked to stay at least ``KINK_GAP`` away from them, so that central
differences and float32 rounding never straddle one.
"""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import lezero as lz
import lezero.functions as F
from lezero.testing import check_all, check_gradient, check_torch, rand

REDUCTIONS = ["none", "mean", "sum"]
KINK_GAP = 1e-2


def T(a):
    """A constant torch tensor (float arrays in float32, as check_torch's inputs)."""
    a = np.asarray(a)
    return torch.tensor(a.astype(np.float32) if a.dtype.kind == "f" else a)


def like(t, a):
    """A float target in the dtype of the input ``a`` (float targets must match it)."""
    return t.astype(a.dtype)


def assert_away_from_kinks(z):
    """The hinge arguments of a test point are all at least KINK_GAP from 0."""
    assert np.min(np.abs(z)) > KINK_GAP, "test point too close to a hinge kink"


X = rand(5, 4, seed=0, low=-2.0, high=2.0)
SIGNS = np.where(rand(5, 4, seed=1) > 0, 1.0, -1.0)
LABELS01 = (rand(5, 4, seed=2) > 0).astype(np.float64)
CLASS_W = rand(4, seed=3, low=0.5, high=2.0)
Y = np.array([0, 3, 1, 2, 2])
# class lists padded with -1: a duplicate (1, 1), an empty list, all classes, and junk
# (valid indices) after the first -1, which must be ignored
LISTS = np.array([[3, 0, -1, 1], [1, 1, -1, 2], [-1, 0, 0, 0], [0, 1, 2, 3], [2, -1, 3, 3]])


# ----- soft_margin_loss -----------------------------------------------------------------

@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_soft_margin_loss(reduction):
    check_all(lambda a: F.soft_margin_loss(a, like(SIGNS, a), reduction=reduction),
              lambda a: TF.soft_margin_loss(a, T(SIGNS), reduction=reduction), X)


def test_soft_margin_loss_target_forms():
    """Broadcast targets, integer targets, an unbatched 0-d pair, and the true gradient
    for a float target (PyTorch refuses one; the derivative is -x * sigmoid(-y x))."""
    row = SIGNS[0]
    check_all(lambda a: F.soft_margin_loss(a, like(row, a)),
              lambda a: TF.soft_margin_loss(a, T(row)), X)
    ints = SIGNS.astype(np.int64)
    check_torch(lambda a: F.soft_margin_loss(a, ints, reduction="sum"),
                lambda a: TF.soft_margin_loss(a, torch.tensor(ints), reduction="sum"),
                X.astype(np.float32))
    check_all(lambda a: F.soft_margin_loss(a, like(np.array(-1.0), a)),
              lambda a: TF.soft_margin_loss(a, T(np.array(-1.0))), np.array(0.3))
    check_gradient(lambda a, t: F.soft_margin_loss(a, t, reduction="sum"), X, SIGNS * 0.7)


def test_soft_margin_loss_is_finite_for_large_margins():
    x = np.array([-200.0, 200.0], np.float32)
    y = F.soft_margin_loss(x, np.array([1.0, -1.0], np.float32), reduction="none")
    np.testing.assert_allclose(y.data, [200.0, 200.0])


# ----- multilabel_soft_margin_loss ------------------------------------------------------

@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_multilabel_soft_margin_loss(reduction):
    check_all(lambda a: F.multilabel_soft_margin_loss(a, like(LABELS01, a),
                                                       reduction=reduction),
              lambda a: TF.multilabel_soft_margin_loss(a, T(LABELS01), reduction=reduction),
              X)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_multilabel_soft_margin_loss_weight(reduction):
    """The weight is an operand as in PyTorch (which applies it in Python): it and the
    float target get gradients too."""
    check_all(lambda a, t, w: F.multilabel_soft_margin_loss(a, t, weight=w,
                                                            reduction=reduction),
              lambda a, t, w: TF.multilabel_soft_margin_loss(a, t, weight=w,
                                                             reduction=reduction),
              X, LABELS01, CLASS_W)


def test_multilabel_soft_margin_loss_shapes():
    """Unbatched (C,), extra leading axes (classes last), integer labels, (N, C) weight."""
    check_all(lambda a: F.multilabel_soft_margin_loss(a, like(LABELS01[0], a), reduction="none"),
              lambda a: TF.multilabel_soft_margin_loss(a, T(LABELS01[0]), reduction="none"),
              X[0])
    x3, t3 = X.reshape(5, 2, 2), LABELS01.reshape(5, 2, 2)
    check_all(lambda a: F.multilabel_soft_margin_loss(a, like(t3, a), reduction="none"),
              lambda a: TF.multilabel_soft_margin_loss(a, T(t3), reduction="none"), x3)
    ints, w2 = LABELS01.astype(np.int64), rand(5, 4, seed=4, low=0.5, high=2.0)
    check_torch(lambda a: F.multilabel_soft_margin_loss(a, ints, weight=like(w2, a)),
                lambda a: TF.multilabel_soft_margin_loss(a, torch.tensor(ints), weight=T(w2)),
                X.astype(np.float32))


# ----- multi_margin_loss ----------------------------------------------------------------

def _multi_margin_z(x, y, margin):
    """The hinge arguments margin - x[y] + x[i] for i != y."""
    x2, y1 = x.reshape(-1, x.shape[-1]), np.reshape(y, -1)
    z = margin - x2[np.arange(len(y1)), y1][:, None] + x2
    return z[np.arange(x2.shape[1]) != y1[:, None]]


MULTI_MARGIN_CASES = [
    {"p": p, "margin": margin, "weight": weight, "reduction": reduction}
    for p, margin in ((1, 1.0), (2, 0.6), (1, -0.3))
    for weight in (None, CLASS_W)
    for reduction in REDUCTIONS]


@pytest.mark.parametrize("kw", MULTI_MARGIN_CASES,
                         ids=lambda kw: (f"p{kw['p']}-m{kw['margin']}-{kw['reduction']}"
                                         f"{'-w' if kw['weight'] is not None else ''}"))
def test_multi_margin_loss(kw):
    assert_away_from_kinks(_multi_margin_z(X, Y, kw["margin"]))
    t_kw = dict(kw, weight=None if kw["weight"] is None else T(kw["weight"]))
    # p = 1 is piecewise linear (second derivative 0); p = 2 has a real one
    check_all(lambda a: F.multi_margin_loss(a, Y, **kw),
              lambda a: TF.multi_margin_loss(a, torch.tensor(Y), **t_kw), X)


@pytest.mark.parametrize("target", [np.array(2), np.array([2])], ids=["0d", "1d"])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_multi_margin_loss_unbatched(target, reduction):
    x = X[1]
    assert_away_from_kinks(_multi_margin_z(x, target, 1.0))
    check_all(lambda a: F.multi_margin_loss(a, target, p=2, weight=CLASS_W,
                                            reduction=reduction),
              lambda a: TF.multi_margin_loss(a, torch.tensor(target), p=2,
                                             weight=T(CLASS_W), reduction=reduction), x)


def test_multi_margin_loss_weight_is_a_constant():
    """As in PyTorch, the class weight gets no gradient (even given as a Variable)."""
    x, w = lz.Variable(X.astype(np.float32)), lz.Variable(CLASS_W.astype(np.float32))
    F.multi_margin_loss(x, Y, weight=w).backward()
    assert x.grad is not None and w.grad is None


# ----- multilabel_margin_loss -----------------------------------------------------------

def _multilabel_margin_z(x, lists):
    """1 - x[j] + x[i] for every listed j and unlisted i of each sample."""
    out = []
    for xs, ts in zip(x.reshape(-1, x.shape[-1]), lists.reshape(-1, x.shape[-1])):
        listed = list(ts[:list(ts).index(-1)] if -1 in ts else ts)
        out += [1 - xs[j] + xs[i] for j in listed for i in range(len(xs)) if i not in listed]
    return np.array(out)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_multilabel_margin_loss(reduction):
    assert_away_from_kinks(_multilabel_margin_z(X, LISTS))
    check_all(lambda a: F.multilabel_margin_loss(a, LISTS, reduction=reduction),
              lambda a: TF.multilabel_margin_loss(a, torch.tensor(LISTS), reduction=reduction),
              X)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_multilabel_margin_loss_unbatched(reduction):
    x, lists = X[0], LISTS[0]
    assert_away_from_kinks(_multilabel_margin_z(x, lists))
    check_all(lambda a: F.multilabel_margin_loss(a, lists, reduction=reduction),
              lambda a: TF.multilabel_margin_loss(a, torch.tensor(lists), reduction=reduction),
              x)


def test_multilabel_margin_loss_worked_example():
    """PyTorch's documented example: classes 3 and 0 listed, loss 0.85."""
    x = np.array([[0.1, 0.2, 0.4, 0.8]], np.float32)
    y = F.multilabel_margin_loss(x, np.array([[3, 0, -1, 1]]))
    np.testing.assert_allclose(y.data, 0.85, rtol=1e-6)
    assert y.dtype == np.float32


# ----- bad inputs -----------------------------------------------------------------------

X32, SIGNS32 = X.astype(np.float32), SIGNS.astype(np.float32)
BAD_INPUTS = [
    # reductions
    (lambda: F.soft_margin_loss(X32, SIGNS32, reduction="avg"), ValueError,
     "soft_margin_loss: reduction must be one of"),
    (lambda: F.multilabel_soft_margin_loss(X32, SIGNS32, reduction=None), TypeError,
     "multilabel_soft_margin_loss: reduction must be a str"),
    (lambda: F.multi_margin_loss(X32, Y, reduction="batchmean"), ValueError,
     "multi_margin_loss: reduction must be one of"),
    (lambda: F.multilabel_margin_loss(X32, LISTS, reduction=1), TypeError,
     "multilabel_margin_loss: reduction must be a str"),
    # target shapes
    (lambda: F.soft_margin_loss(X32, SIGNS32[:, :3]), ValueError,
     r"soft_margin_loss: target of shape \(5, 3\) does not broadcast"),
    (lambda: F.soft_margin_loss(X32[0], SIGNS32), ValueError,
     r"soft_margin_loss: target of shape \(5, 4\) does not broadcast"),
    (lambda: F.multilabel_soft_margin_loss(X32, SIGNS32[:2]), ValueError,
     "multilabel_soft_margin_loss: target of shape"),
    (lambda: F.multi_margin_loss(X32, Y[:3]), ValueError,
     r"multi_margin_loss: target must have shape \(5,\), got \(3,\)"),
    (lambda: F.multi_margin_loss(X32, Y[:, None]), ValueError,
     "multi_margin_loss: target must have shape"),
    (lambda: F.multi_margin_loss(X32[0], Y[:2]), ValueError,
     r"multi_margin_loss: target must have shape \(\) or \(1,\)"),
    (lambda: F.multilabel_margin_loss(X32, LISTS[:, :3]), ValueError,
     r"multilabel_margin_loss: target must have shape \(5, 4\)"),
    # target kinds and values
    (lambda: F.soft_margin_loss(X32, "abc"), TypeError,
     "soft_margin_loss: target must be a Variable or an ndarray"),
    (lambda: F.soft_margin_loss(X32, SIGNS), TypeError,
     "soft_margin_loss: inputs must share one floating dtype"),
    (lambda: F.multi_margin_loss(X32, Y.astype(np.float32)), TypeError,
     "multi_margin_loss: target must hold integer class indices"),
    (lambda: F.multi_margin_loss(X32, Y + 2), ValueError,
     r"multi_margin_loss: target values must be in \[0, 4\)"),
    (lambda: F.multi_margin_loss(X32, Y - 1), ValueError,
     r"multi_margin_loss: target values must be in \[0, 4\)"),
    (lambda: F.multilabel_margin_loss(X32, LISTS - 1), ValueError,
     r"multilabel_margin_loss: target values must be in \[-1, 4\)"),
    (lambda: F.multilabel_margin_loss(X32, np.where(LISTS == 3, 4, LISTS)), ValueError,
     r"multilabel_margin_loss: target values must be in \[-1, 4\)"),
    (lambda: F.multilabel_margin_loss(X32, LISTS.astype(np.float32)), TypeError,
     "multilabel_margin_loss: target must hold integer class indices"),
    # p, margin, weight
    (lambda: F.multi_margin_loss(X32, Y, p=3), ValueError,
     "multi_margin_loss: p must be 1 or 2 .*got 3"),
    (lambda: F.multi_margin_loss(X32, Y, p=0), ValueError, "multi_margin_loss: p must be"),
    (lambda: F.multi_margin_loss(X32, Y, p="2"), TypeError,
     "multi_margin_loss: p must be 1 or 2, got str"),
    (lambda: F.multi_margin_loss(X32, Y, p=True), TypeError, "multi_margin_loss: p must"),
    (lambda: F.multi_margin_loss(X32, Y, margin="1"), TypeError,
     "multi_margin_loss: margin must be a number"),
    (lambda: F.multi_margin_loss(X32, Y, weight=np.ones(5, np.float32)), ValueError,
     r"multi_margin_loss: weight must have shape \(4,\)"),
    (lambda: F.multi_margin_loss(X32, Y, weight=[1.0] * 4), TypeError,
     "multi_margin_loss: weight must be a Variable or an ndarray"),
    (lambda: F.multilabel_soft_margin_loss(X32, LABELS01.astype(np.float32),
                                           weight=np.ones(3, np.float32)), ValueError,
     r"multilabel_soft_margin_loss: weight of shape \(3,\) does not broadcast"),
    (lambda: F.multilabel_soft_margin_loss(X32, LABELS01.astype(np.float32),
                                           weight=np.ones(4)), TypeError,
     "multilabel_soft_margin_loss: inputs must share one floating dtype"),
    # input shapes and kinds
    (lambda: F.multi_margin_loss(X32.reshape(5, 2, 2), Y), ValueError,
     r"multi_margin_loss: input must be \(C,\) or \(N, C\)"),
    (lambda: F.multi_margin_loss(np.array(0.5, np.float32), np.array(0)), ValueError,
     "multi_margin_loss: input must be"),
    (lambda: F.multilabel_margin_loss(X32.reshape(5, 2, 2), LISTS.reshape(5, 2, 2)),
     ValueError, "multilabel_margin_loss: input must be"),
    (lambda: F.multilabel_soft_margin_loss(np.array(0.5, np.float32),
                                           np.array(1.0, np.float32)), ValueError,
     "multilabel_soft_margin_loss: input must have a class axis"),
    (lambda: F.multilabel_margin_loss(LISTS, LISTS), TypeError,
     "multilabel_margin_loss: input must be floating point"),
]


@pytest.mark.parametrize("call,error,match", BAD_INPUTS, ids=range(len(BAD_INPUTS)))
def test_bad_inputs(call, error, match):
    with pytest.raises(error, match=match):
        call()
