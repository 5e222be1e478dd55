"""Loss operators: central differences (float64), double backward, PyTorch parity (float32)
and bad inputs, for every loss in ``lezero.functions.loss``."""
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import lezero as lz
import lezero.functions as F
from lezero.functions.loss.categorical import SoftmaxCrossEntropy
from lezero.functions import log_softmax
from lezero.testing import check_all, check_gradient, check_torch, rand


def T(a):
    """A constant torch tensor (float arrays in float32, as check_torch's inputs)."""
    a = np.asarray(a)
    return torch.tensor(a.astype(np.float32) if a.dtype.kind == "f" else a)


def probs(*shape, seed):
    """Random class probabilities along axis 1."""
    p = np.random.default_rng(seed).uniform(0.1, 1.0, size=shape)
    return p / p.sum(axis=1, keepdims=True)


# ----- cross_entropy / nll_loss --------------------------------------------------------

W5 = rand(5, low=0.5, high=2.0, seed=2)
Y5 = np.array([0, 3, -100, 4, 3])
CE_CASES = [
    {}, {"reduction": "none"}, {"reduction": "sum"}, {"weight": W5},
    {"weight": W5, "label_smoothing": 0.2}, {"label_smoothing": 0.3, "reduction": "none"},
    {"weight": W5, "reduction": "sum", "label_smoothing": 0.1},
]


def _torch_kwargs(kw):
    return {k: (T(v) if k == "weight" else v) for k, v in kw.items()}


@pytest.mark.parametrize("kw", CE_CASES, ids=str)
def test_cross_entropy_class_indices(kw):
    x = rand(5, 5, seed=1)
    check_all(lambda a: F.cross_entropy(a, Y5, **kw),
              lambda a: TF.cross_entropy(a, T(Y5), **_torch_kwargs(kw)), x)


def test_cross_entropy_nd_input_weight_ignore_smoothing():
    x = rand(2, 3, 2, 2, seed=3)
    y = np.array([[[0, 2], [1, -1]], [[2, 2], [0, 1]]])
    w = W5[:3]
    for kw in ({"ignore_index": -1, "weight": w, "label_smoothing": 0.1},
               {"ignore_index": 2, "reduction": "none"}):
        y_ok = np.where(y < 0, kw["ignore_index"], y)
        check_all(lambda a: F.cross_entropy(a, y_ok, **kw),
                  lambda a: TF.cross_entropy(a, T(y_ok), **_torch_kwargs(kw)), x)


def test_cross_entropy_ignore_index_inside_the_class_range():
    x = rand(4, 3, seed=4)
    y = np.array([1, 1, 0, 2])
    check_all(lambda a: F.cross_entropy(a, y, ignore_index=1, weight=W5[:3]),
              lambda a: TF.cross_entropy(a, T(y), ignore_index=1, weight=T(W5[:3])), x)


@pytest.mark.parametrize("kw", [{}, {"weight": W5[:3], "label_smoothing": 0.2},
                                {"reduction": "none"}, {"reduction": "sum"}], ids=str)
def test_cross_entropy_probability_targets_constant(kw):
    x, p = rand(2, 3, 2, seed=5), probs(2, 3, 2, seed=6)
    check_all(lambda a: F.cross_entropy(a, p.astype(a.dtype), **kw),
              lambda a: TF.cross_entropy(a, T(p), **_torch_kwargs(kw)), x)


def test_cross_entropy_probability_targets_get_a_gradient():
    x, p = rand(3, 4, seed=7), probs(3, 4, seed=8)
    kw = {"weight": W5[:4], "label_smoothing": 0.1}
    check_all(lambda a, t: F.cross_entropy(a, t, **kw),
              lambda a, t: TF.cross_entropy(a, t, **_torch_kwargs(kw)), x, p)


def test_cross_entropy_unbatched():
    check_all(lambda a: F.cross_entropy(a, np.array(2), reduction="none"),
              lambda a: TF.cross_entropy(a, T(np.array(2)), reduction="none"), rand(5, seed=9))
    p = probs(1, 4, seed=10)[0]
    check_all(lambda a: F.cross_entropy(a, p.astype(a.dtype)),
              lambda a: TF.cross_entropy(a, T(p)), rand(4, seed=11))


def test_cross_entropy_is_one_fused_function_and_equals_nll_of_log_softmax():
    x = lz.Variable(rand(4, 5, seed=12))
    loss = F.cross_entropy(x, Y5[:4], weight=W5)
    assert isinstance(loss.creator, SoftmaxCrossEntropy)
    assert loss.creator.inputs[0] is x
    ref = F.nll_loss(log_softmax(x, axis=1), Y5[:4], weight=W5)
    np.testing.assert_allclose(loss.data, ref.data, rtol=1e-12)
    g1, = lz.grad(loss, x)
    g2, = lz.grad(ref, x)
    np.testing.assert_allclose(g1.data, g2.data, rtol=1e-10, atol=1e-14)


def test_cross_entropy_third_derivative():
    x = rand(2, 3, seed=13)
    u, v = rand(2, 3, seed=14), rand(2, 3, seed=15)
    y = np.array([2, 0])

    def second(a):
        g, = lz.grad(F.cross_entropy(a, y, label_smoothing=0.1), a, create_graph=True)
        h, = lz.grad(F.sum(g * v), a, create_graph=True)
        return F.sum(h * u)
    check_gradient(second, x, rtol=1e-4, atol=1e-6)


def test_cross_entropy_all_ignored_mean_is_nan_as_torch():
    x = rand(2, 3, seed=16).astype(np.float32)
    y = np.array([-100, -100])
    with np.errstate(invalid="ignore"):
        out = F.cross_entropy(x, y).item()
    assert np.isnan(out) and np.isnan(TF.cross_entropy(T(x), T(y)).item())


@pytest.mark.parametrize("kw", [{}, {"weight": W5, "reduction": "none"},
                                {"ignore_index": 3, "reduction": "sum"}], ids=str)
def test_nll_loss(kw):
    y = np.where(Y5 < 0, 1, Y5)
    check_all(lambda a: F.nll_loss(a, y, **kw),
              lambda a: TF.nll_loss(a, T(y), **_torch_kwargs(kw)), rand(5, 5, seed=17))


def test_nll_loss_nd_and_unbatched():
    x = rand(2, 3, 4, seed=18)
    y = np.array([[0, 2, 1, -100], [2, 2, 0, 1]])
    check_all(lambda a: F.nll_loss(a, y, weight=W5[:3]),
              lambda a: TF.nll_loss(a, T(y), weight=T(W5[:3])), x)
    check_all(lambda a: F.nll_loss(a, np.array(1), reduction="none"),
              lambda a: TF.nll_loss(a, T(np.array(1)), reduction="none"), rand(3, seed=19))


def test_cross_entropy_on_gpu(xp):
    x = rand(4, 5, seed=20, dtype=np.float32)
    check_torch(lambda a: F.cross_entropy(a, xp.asarray(Y5[:4]), weight=xp.asarray(
        W5.astype(np.float32)), label_smoothing=0.1),
        lambda a: TF.cross_entropy(a, T(Y5[:4]), weight=T(W5), label_smoothing=0.1), x, xp=xp)


# ----- regression losses ---------------------------------------------------------------

PAIR = (rand(3, 4, seed=21), rand(3, 4, seed=22, low=-2, high=2))
WEIGHT = rand(3, 4, low=0.1, high=1.0, seed=23)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("name", ["mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss"])
def test_pointwise_losses(name, reduction):
    ours, theirs = getattr(F, name), getattr(TF, name)
    check_all(lambda a, b: ours(a, b, reduction=reduction),
              lambda a, b: theirs(a, b, reduction=reduction), *PAIR)


@pytest.mark.parametrize("name", ["mse_loss", "l1_loss", "huber_loss"])
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_pointwise_losses_with_weight(name, reduction):
    ours, theirs = getattr(F, name), getattr(TF, name)
    check_all(lambda a, b, w: ours(a, b, reduction=reduction, weight=w),
              lambda a, b, w: theirs(a, b, reduction=reduction, weight=w), *PAIR, WEIGHT)


@pytest.mark.parametrize("beta", [0.0, 0.5, 2.0])
def test_smooth_l1_and_huber_thresholds(beta):
    check_all(lambda a, b: F.smooth_l1_loss(a, b, beta=beta),
              lambda a, b: TF.smooth_l1_loss(a, b, beta=beta), *PAIR)
    if beta:
        check_all(lambda a, b: F.huber_loss(a, b, delta=beta, reduction="none"),
                  lambda a, b: TF.huber_loss(a, b, delta=beta, reduction="none"), *PAIR)


@pytest.mark.parametrize("log_input,full", [(True, False), (False, False), (True, True),
                                            (False, True)])
def test_poisson_nll_loss(log_input, full):
    x = rand(3, 4, low=0.2, high=2.0, seed=24)
    t = rand(3, 4, low=0.0, high=3.0, seed=25)
    check_all(lambda a, b: F.poisson_nll_loss(a, b, log_input=log_input, full=full),
              lambda a, b: TF.poisson_nll_loss(a, b, log_input=log_input, full=full), x, t)


@pytest.mark.parametrize("var_shape", [(3, 4), (3,), (3, 1), (1, 4)])
def test_gaussian_nll_loss_var_shapes(var_shape):
    var = rand(*var_shape, low=0.2, high=2.0, seed=26)
    check_all(lambda a, b, v: F.gaussian_nll_loss(a, b, v, full=True),
              lambda a, b, v: TF.gaussian_nll_loss(a, b, v, full=True), *PAIR, var)


def test_gaussian_nll_loss_scalar_var_and_eps_clamp():
    check_all(lambda a, b: F.gaussian_nll_loss(a, b, 0.7, reduction="sum"),
              lambda a, b: TF.gaussian_nll_loss(a, b, 0.7, reduction="sum"), *PAIR)
    var = np.array([1e-9, 0.5, 2.0])                  # the first is clamped to eps
    x, t = rand(3, seed=27), rand(3, seed=28)
    check_torch(lambda a, b, v: F.gaussian_nll_loss(a, b, v, eps=1e-3, reduction="none"),
                lambda a, b, v: TF.gaussian_nll_loss(a, b, v, eps=1e-3, reduction="none"),
                *[np.float32(v) for v in (x, t, var)], rtol=1e-4, atol=1e-3)


# ----- binary and distribution losses --------------------------------------------------

def test_binary_cross_entropy():
    x = rand(3, 4, low=0.05, high=0.95, seed=29)
    t = rand(3, 4, low=0.0, high=1.0, seed=30)
    w = rand(4, low=0.5, high=1.5, seed=31)
    for kw in ({}, {"reduction": "sum"}, {"reduction": "none"}):
        check_all(lambda a, b: F.binary_cross_entropy(a, b, **kw),
                  lambda a, b: TF.binary_cross_entropy(a, b, **kw), x, t)
    check_all(lambda a, b: F.binary_cross_entropy(a, b, weight=w.astype(a.dtype)),
              lambda a, b: TF.binary_cross_entropy(a, b, weight=T(w)), x, t)


def test_binary_cross_entropy_at_exact_zero_and_one_matches_torch():
    x = np.array([0.0, 1.0, 0.0, 1.0, 0.5], np.float32)
    t = np.array([1.0, 0.0, 0.0, 1.0, 0.3], np.float32)
    check_torch(lambda a: F.binary_cross_entropy(a, t, reduction="none"),
                lambda a: TF.binary_cross_entropy(a, T(t), reduction="none"), x)
    np.testing.assert_allclose(F.binary_cross_entropy(x, t, reduction="none").data[:2], 100)


PW4 = rand(4, low=0.5, high=3.0, seed=34)
W31 = rand(3, 1, low=0.5, seed=35)


@pytest.mark.parametrize("kw", [{}, {"reduction": "none"}, {"pos_weight": PW4},
                                {"weight": W31, "pos_weight": PW4, "reduction": "sum"}],
                         ids=["mean", "none", "pos_weight", "both_weights"])
def test_binary_cross_entropy_with_logits(kw):
    x, t = rand(3, 4, low=-3, high=3, seed=32), rand(3, 4, low=0, high=1, seed=33)

    def ours(a, b):
        return F.binary_cross_entropy_with_logits(
            a, b, **{k: v.astype(a.dtype) if isinstance(v, np.ndarray) else v
                     for k, v in kw.items()})
    theirs = {k: T(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()}
    check_all(ours, lambda a, b: TF.binary_cross_entropy_with_logits(a, b, **theirs), x, t)


def test_binary_cross_entropy_with_logits_is_stable_at_1000():
    x = np.array([1000.0, -1000.0, 1000.0, -1000.0], np.float32)
    t = np.array([0.0, 1.0, 1.0, 0.0], np.float32)
    pw = np.array([2.0], np.float32)
    check_torch(lambda a: F.binary_cross_entropy_with_logits(a, t, pos_weight=pw,
                                                             reduction="none"),
                lambda a: TF.binary_cross_entropy_with_logits(a, T(t), pos_weight=T(pw),
                                                              reduction="none"), x)
    out = F.binary_cross_entropy_with_logits(x, t, pos_weight=pw, reduction="none").data
    np.testing.assert_allclose(out, [1000.0, 2000.0, 0.0, 0.0])


@pytest.mark.parametrize("reduction", ["mean", "batchmean", "sum", "none"])
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div(reduction, log_target):
    x = np.log(probs(3, 4, seed=36))
    t = probs(3, 4, seed=37)
    t = np.log(t) if log_target else t
    with warnings.catch_warnings():      # PyTorch warns that 'mean' is not the true KL
        warnings.simplefilter("ignore", UserWarning)
        check_all(lambda a, b: F.kl_div(a, b, reduction=reduction, log_target=log_target),
                  lambda a, b: TF.kl_div(a, b, reduction=reduction, log_target=log_target),
                  x, t)


def test_kl_div_zero_target_contributes_zero():
    x = np.log(np.array([[0.5, 0.5]], np.float32))
    out = F.kl_div(x, np.array([[0.0, 1.0]], np.float32), reduction="none").data
    np.testing.assert_allclose(out, [[0.0, np.log(2)]], rtol=1e-6)


# ----- margin and embedding losses -----------------------------------------------------

def test_cosine_embedding_loss():
    a, b = rand(4, 3, seed=38), rand(4, 3, seed=39)
    y = np.array([1, -1, -1, 1])
    for kw in ({}, {"margin": 0.2, "reduction": "none"}, {"margin": -0.5, "reduction": "sum"}):
        check_all(lambda u, v: F.cosine_embedding_loss(u, v, y, **kw),
                  lambda u, v: TF.cosine_embedding_loss(u, v, T(y), **kw), a, b)
    check_all(lambda u, v: F.cosine_embedding_loss(u, v, np.array(-1), margin=-0.9),
              lambda u, v: TF.cosine_embedding_loss(u, v, T(np.array(-1)), margin=-0.9),
              a[0], b[0])


def test_margin_ranking_loss():
    a, b = rand(5, seed=40), rand(5, seed=41)
    y = np.array([1.0, -1.0, 1.0, -1.0, 1.0])
    for kw in ({}, {"margin": 0.3, "reduction": "none"}):
        check_all(lambda u, v, t: F.margin_ranking_loss(u, v, t, **kw),
                  lambda u, v, t: TF.margin_ranking_loss(u, v, t, **kw), a, b, y)


@pytest.mark.parametrize("kw", [{}, {"p": 1}, {"p": 3, "margin": 0.5}, {"swap": True},
                                {"reduction": "none", "swap": True, "margin": 2.0}], ids=str)
def test_triplet_margin_loss(kw):
    a, p, n = rand(4, 3, seed=42), rand(4, 3, seed=43), rand(4, 3, seed=44)
    check_all(lambda x, y, z: F.triplet_margin_loss(x, y, z, **kw),
              lambda x, y, z: TF.triplet_margin_loss(x, y, z, **kw), a, p, n)


def test_hinge_embedding_loss():
    x = rand(3, 4, low=-2, high=2, seed=45)
    y = np.where(rand(3, 4, seed=46) > 0, 1.0, -1.0)
    for kw in ({}, {"margin": 0.5, "reduction": "none"}, {"reduction": "sum"}):
        check_all(lambda a: F.hinge_embedding_loss(a, y, **kw),
                  lambda a: TF.hinge_embedding_loss(a, T(y), **kw), x)


# ----- ctc_loss ----------------------------------------------------------------------------

CTC_TARGETS = np.array([[1, 2, 2], [3, 1, 0], [2, 0, 0]])
CTC_IN = np.array([6, 5, 4])
CTC_TL = np.array([3, 2, 0])


def _torch_ctc(a, targets, il, tl, **kw):
    return TF.ctc_loss(a.log_softmax(2), T(targets), T(il), T(tl), **kw)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_ctc_loss_gradient_and_torch(reduction):
    x = rand(6, 3, 4, seed=47)
    check_gradient(lambda a: F.ctc_loss(a, CTC_TARGETS, CTC_IN, CTC_TL, reduction=reduction),
                   x)
    # PyTorch's gradient is the one of the logits before log_softmax: compare through it.
    check_torch(lambda a: F.ctc_loss(log_softmax(a, 2), CTC_TARGETS, CTC_IN, CTC_TL,
                                     reduction=reduction),
                lambda a: _torch_ctc(a, CTC_TARGETS, CTC_IN, CTC_TL, reduction=reduction),
                x.astype(np.float32))


def test_ctc_loss_concatenated_targets_blank_and_infinite_losses():
    x = rand(6, 3, 4, seed=48).astype(np.float32)
    flat, tl = np.array([1, 2, 2, 3, 1]), np.array([3, 2, 0])
    check_torch(lambda a: F.ctc_loss(log_softmax(a, 2), flat, CTC_IN, tl, reduction="none"),
                lambda a: _torch_ctc(a, flat, CTC_IN, tl, reduction="none"), x)
    # Targets too long for their inputs are impossible: infinite loss, or 0 with zero_infinity.
    tg, il, tl = np.array([[0, 1, 1, 1], [2, 2, 2, 0], [1, 0, 0, 0]]), [6, 3, 2], [4, 3, 1]
    for zi in (False, True):
        out = F.ctc_loss(log_softmax(x, 2), tg, il, tl, blank=3, reduction="none",
                         zero_infinity=zi)
        ref = TF.ctc_loss(T(x).log_softmax(2), T(tg), T(np.array(il)), T(np.array(tl)),
                          blank=3, reduction="none", zero_infinity=zi)
        np.testing.assert_allclose(out.data, ref.numpy(), rtol=1e-5)
    check_torch(lambda a: F.ctc_loss(log_softmax(a, 2), tg, il, tl, blank=3,
                                     zero_infinity=True),
                lambda a: _torch_ctc(a, tg, il, tl, blank=3, zero_infinity=True), x)


def test_ctc_loss_unbatched_and_no_double_backward():
    x = rand(5, 3, seed=49)
    check_torch(lambda a: F.ctc_loss(log_softmax(a, 1), np.array([1, 2]), 5, 2,
                                     reduction="none"),
                lambda a: TF.ctc_loss(a.log_softmax(1), T(np.array([1, 2])), T(np.array(5)),
                                      T(np.array(2)), reduction="none"), x.astype(np.float32))
    v = lz.Variable(x)
    g, = lz.grad(F.ctc_loss(v, np.array([1, 2]), 5, 2), v, create_graph=True)
    with pytest.raises(NotImplementedError, match="ctc_loss: double backward"):
        lz.grad(F.sum(g * g), v)


# ----- dtype and bad inputs ------------------------------------------------------------------

def _all_losses(x, t, y_idx):
    """One call of every loss on float32 data."""
    pos = np.abs(x) + 0.1
    unit = 1 / (1 + np.exp(-x))
    yield F.cross_entropy(x, y_idx)
    yield F.nll_loss(x, y_idx)
    for f in (F.mse_loss, F.l1_loss, F.smooth_l1_loss, F.huber_loss, F.kl_div,
              F.binary_cross_entropy_with_logits, F.poisson_nll_loss):
        yield f(x, t)
    yield F.binary_cross_entropy(unit, t)
    yield F.gaussian_nll_loss(x, t, pos)
    yield F.cosine_embedding_loss(x, t, np.ones(len(x)))
    yield F.margin_ranking_loss(x, t, np.ones_like(x))
    yield F.triplet_margin_loss(x, t, pos)
    yield F.hinge_embedding_loss(x, np.ones_like(x))
    yield F.ctc_loss(x.reshape(2, 1, 3), np.array([[1]]), [2], [1])


def test_float32_in_float32_out():
    x = rand(2, 3, seed=50, dtype=np.float32)
    t = rand(2, 3, low=0, high=1, seed=51, dtype=np.float32)
    outs = list(_all_losses(lz.Variable(x), t, np.array([0, 2])))
    assert len(outs) == 16
    for out in outs:
        assert out.dtype == np.float32, out.creator


LOSSES_WITH_REDUCTION = [
    lambda r: F.cross_entropy(np.ones((2, 3), np.float32), np.array([0, 1]), reduction=r),
    lambda r: F.nll_loss(np.ones((2, 3), np.float32), np.array([0, 1]), reduction=r),
    lambda r: F.mse_loss(np.ones(2), np.ones(2), reduction=r),
    lambda r: F.l1_loss(np.ones(2), np.ones(2), reduction=r),
    lambda r: F.smooth_l1_loss(np.ones(2), np.ones(2), reduction=r),
    lambda r: F.huber_loss(np.ones(2), np.ones(2), reduction=r),
    lambda r: F.binary_cross_entropy(np.ones(2) / 2, np.ones(2), reduction=r),
    lambda r: F.binary_cross_entropy_with_logits(np.ones(2), np.ones(2), reduction=r),
    lambda r: F.kl_div(np.ones(2), np.ones(2), reduction=r),
    lambda r: F.cosine_embedding_loss(np.ones((2, 2)), np.ones((2, 2)), np.ones(2),
                                      reduction=r),
    lambda r: F.margin_ranking_loss(np.ones(2), np.ones(2), np.ones(2), reduction=r),
    lambda r: F.triplet_margin_loss(np.ones(2), np.ones(2), np.ones(2), reduction=r),
    lambda r: F.hinge_embedding_loss(np.ones(2), np.ones(2), reduction=r),
    lambda r: F.poisson_nll_loss(np.ones(2), np.ones(2), reduction=r),
    lambda r: F.gaussian_nll_loss(np.ones(2), np.ones(2), np.ones(2), reduction=r),
    lambda r: F.ctc_loss(np.zeros((2, 1, 3)), np.array([[1]]), [2], [1], reduction=r),
]


@pytest.mark.parametrize("call", LOSSES_WITH_REDUCTION)
def test_wrong_reduction_string_is_rejected(call):
    with pytest.raises(ValueError, match="reduction must be one of .* got 'avg'"):
        call("avg")
    with pytest.raises(TypeError, match=r"reduction must be a str \(one of .*\), got NoneType"):
        call(None)


@pytest.mark.parametrize("op", ["cross_entropy", "nll_loss"])
def test_an_int_weight_asks_for_ignore_index_by_keyword(op):
    # PyTorch's order is (input, target, weight, ignore_index ...): an int in third place
    # is a weight, which is nearly always a mistake for ignore_index.
    x, y = rand(3, 4, dtype=np.float32, seed=11), np.array([0, 1, 2])
    with pytest.raises(TypeError, match=rf"^{op}: weight must be an array with one weight per "
                                        rf"class, got int 2; .* pass ignore_index by keyword: "
                                        rf"{op}\(input, target, ignore_index=2\)"):
        getattr(F, op)(x, y, 2)
    with pytest.raises(TypeError, match=rf"^{op}: weight must be an array .* got list"):
        getattr(F, op)(x, y, [1.0, 1.0, 1.0, 1.0])
    # By keyword it means what it says: the third sample is left out of the mean.
    got = getattr(F, op)(x, np.array([0, 1, 7]), ignore_index=7)
    np.testing.assert_allclose(got.data, getattr(F, op)(x[:2], y[:2]).data, rtol=1e-6)
    assert not np.allclose(got.data, getattr(F, op)(x, y).data)


@pytest.mark.parametrize("call,name", [
    (lambda: F.poisson_nll_loss(np.ones(2), np.ones(2), full="yes"), "full"),
    (lambda: F.poisson_nll_loss(np.ones(2), np.ones(2), log_input=None), "log_input"),
    (lambda: F.gaussian_nll_loss(np.ones(2), np.ones(2), np.ones(2), full=1), "full"),
    (lambda: F.kl_div(np.ones(2), np.ones(2), log_target="no"), "log_target"),
    (lambda: F.triplet_margin_loss(np.ones(2), np.ones(2), np.ones(2), swap=0), "swap"),
    (lambda: F.ctc_loss(np.zeros((2, 1, 3)), np.array([[1]]), [2], [1], zero_infinity=1),
     "zero_infinity"),
])
def test_flags_must_be_bools(call, name):
    with pytest.raises(TypeError, match=rf"_loss: {name} must be a bool, got|"
                                        rf"kl_div: {name} must be a bool, got"):
        call()


def test_cross_entropy_bad_targets():
    x = np.zeros((3, 4), np.float32)
    with pytest.raises(ValueError, match="cross_entropy: target index 7 is out of range for "
                                         "4 classes"):
        F.cross_entropy(x, np.array([0, 7, 1]))
    with pytest.raises(ValueError, match="target index -2 is out of range"):
        F.nll_loss(x, np.array([0, -2, 1]))
    with pytest.raises(ValueError, match=r"target must have shape \(3,\).*got \(3, 1\)"):
        F.cross_entropy(x, np.zeros((3, 1), np.int64))
    with pytest.raises(TypeError, match="integer class indices or float probabilities"):
        F.cross_entropy(x, np.zeros(3, bool))
    with pytest.raises(ValueError, match=r"probability target must have the input's shape"):
        F.cross_entropy(x, np.zeros(3, np.float32))
    with pytest.raises(TypeError, match="nll_loss: target must hold integer class indices, "
                                        "got dtype float32"):
        F.nll_loss(x, np.zeros((3, 4), np.float32))
    with pytest.raises(TypeError, match="target has dtype float64 but input has dtype "
                                        "float32"):
        F.cross_entropy(x, np.zeros((3, 4)))
    with pytest.raises(ValueError, match=r"weight must have shape \(4,\)"):
        F.cross_entropy(x, np.array([0, 1, 2]), weight=np.ones(3, np.float32))
    with pytest.raises(ValueError, match=r"label_smoothing must be in \[0.0, 1.0\], got 1.5"):
        F.cross_entropy(x, np.array([0, 1, 2]), label_smoothing=1.5)
    with pytest.raises(TypeError, match="input must be floating point"):
        F.cross_entropy(np.zeros((3, 4), np.int64), np.array([0, 1, 2]))


def test_pointwise_loss_bad_inputs():
    a = np.zeros((2, 3), np.float32)
    with pytest.raises(ValueError, match=r"mse_loss: target has shape \(3,\) but input has "
                                         r"shape \(2, 3\)"):
        F.mse_loss(a, a[0])
    with pytest.raises(TypeError, match="l1_loss: inputs must share one floating dtype"):
        F.l1_loss(a, a.astype(np.float64))
    with pytest.raises(ValueError, match="huber_loss: delta must be in"):
        F.huber_loss(a, a, delta=0.0)
    with pytest.raises(ValueError, match="smooth_l1_loss: beta must be in"):
        F.smooth_l1_loss(a, a, beta=-1.0)
    with pytest.raises(ValueError, match=r"mse_loss: weight has shape \(3,\)"):
        F.mse_loss(a, a, weight=a[0])
    with pytest.raises(ValueError, match=r"binary_cross_entropy: input values must lie in "
                                         r"\[0, 1\]"):
        F.binary_cross_entropy(a + 1.5, a)
    with pytest.raises(ValueError, match="pos_weight of shape"):
        F.binary_cross_entropy_with_logits(a, a, pos_weight=np.ones(2, np.float32))
    with pytest.raises(ValueError, match="gaussian_nll_loss: var has negative entries"):
        F.gaussian_nll_loss(a, a, a - 1)
    with pytest.raises(ValueError, match="var of shape .* does not fit"):
        F.gaussian_nll_loss(a, a, np.ones((3, 2), np.float32))
    with pytest.raises(ValueError, match="kl_div: reduction must be one of"):
        F.kl_div(a, a, reduction="batch")
    with pytest.raises(ValueError, match="triplet_margin_loss: margin must be in"):
        F.triplet_margin_loss(a, a, a, margin=0.0)
    with pytest.raises(ValueError, match=r"cosine_embedding_loss: target must have shape "
                                         r"\(2,\)"):
        F.cosine_embedding_loss(a, a, np.ones(3))


def test_ctc_loss_bad_inputs():
    lp = np.zeros((4, 2, 3), np.float32)
    tg = np.array([[1, 2], [2, 0]])
    with pytest.raises(ValueError, match="ctc_loss: target label 3 is out of range"):
        F.ctc_loss(lp, np.array([[1, 3], [1, 1]]), [4, 4], [2, 2])
    with pytest.raises(ValueError, match="target label 0 is out of range.*blank=0"):
        F.ctc_loss(lp, tg, [4, 4], [2, 2])
    with pytest.raises(ValueError, match=r"input_lengths must be in \[0, 4\]"):
        F.ctc_loss(lp, tg, [5, 4], [2, 1])
    with pytest.raises(ValueError, match="target_lengths must have one entry per sample"):
        F.ctc_loss(lp, tg, [4, 4], [2])
    with pytest.raises(ValueError, match="blank must be an int in"):
        F.ctc_loss(lp, tg, [4, 4], [2, 1], blank=3)
    with pytest.raises(ValueError, match="concatenated targets have 3 labels"):
        F.ctc_loss(lp, np.array([1, 2, 1]), [4, 4], [2, 2])
    with pytest.raises(TypeError, match="input_lengths must hold integers"):
        F.ctc_loss(lp, tg, [4.0, 4.0], [2, 1])
    with pytest.raises(ValueError, match=r"log_probs must be \(T, N, C\)"):
        F.ctc_loss(np.zeros(3, np.float32), tg, [4, 4], [2, 1])


@pytest.mark.skipif(not lz.kernels.numba_available(), reason="Numba is not installed")
def test_cross_entropy_softmax_stats_kernel_matches_numpy_reference():
    from lezero.kernels.softmax import softmax_stats_numba as softmax_stats
    from lezero.kernels.softmax import softmax_stats_ref as _softmax_stats
    x = rand(64, 37, dtype=np.float32, low=-30, high=30, seed=21)
    x[3] = -np.inf              # every logit -inf: NaN, as NumPy's inf - inf
    x[4, 5] = np.inf
    x[5, 2] = np.nan
    x[6] *= 100                 # large logits: exp(x - max) must not overflow
    with np.errstate(all="ignore"):
        ref = _softmax_stats(x)
    for got, want in zip(softmax_stats(x), ref):
        assert got.shape == want.shape and got.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-30)
    # the kernel path and the NumPy path give the same loss and gradient
    target = np.arange(64) % 37
    xs = rand(64, 37, dtype=np.float32, seed=22)
    results = []
    for use in (True, False):
        with lz.using_config("use_numba", use):
            v = lz.Variable(xs)
            loss = F.cross_entropy(v, target, label_smoothing=0.1)
            loss.backward()
            results.append((loss.data, v.grad.data))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-6)
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-5, atol=1e-8)
