"""dropout, dropout2d, alpha_dropout: statistics, reproducibility, modes, gradients, torch."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import lezero as lz
import lezero.functions as F
from lezero.testing import check_all, rand

A = 1.7580993408473766      # SELU scale * alpha


def seeded(op, seed=3, **kw):
    """``op`` with the mask held fixed: reseeding before each call redraws the same mask,
    so central differences see one function."""
    def f(x):
        lz.manual_seed(seed)
        return op(x, **kw)
    return f


def mask_scale(op, shape, seed=3, **kw):
    """The multiplier ``op`` applies after manual_seed(seed) (its output on ones)."""
    return seeded(op, seed, **kw)(np.ones(shape, np.float32)).data


OPS = [(F.dropout, (3, 4)), (F.dropout2d, (2, 3, 2, 2)), (F.alpha_dropout, (3, 4))]
IDS = ["dropout", "dropout2d", "alpha_dropout"]


@pytest.mark.parametrize("op,shape", OPS, ids=IDS)
@pytest.mark.parametrize("p", [0.3, 0.7])
def test_gradients_with_fixed_mask(op, shape, p):
    x = rand(*shape, seed=1)
    m1 = mask_scale(op, shape, p=p)
    m0 = seeded(op, p=p)(np.zeros(shape, np.float32)).data     # the shift (alpha_dropout)
    scale, shift = m1 - m0, m0
    check_all(seeded(op, p=p), lambda t: t * torch.tensor(scale) + torch.tensor(shift), x)
    # The gradient is exactly the mask times the scale.
    v = lz.Variable(x.astype(np.float32))
    (g,) = lz.grad(seeded(op, p=p)(v), [v], grad_outputs=np.ones(shape, np.float32))
    np.testing.assert_allclose(g.data, scale, rtol=1e-6)


@pytest.mark.parametrize("p", [0.2, 0.5, 0.9])
def test_dropout_statistics(p):
    y = F.dropout(np.ones(100_000, np.float32), p=p).data
    assert set(np.unique(y)) == {0.0, np.float32(1 / (1 - p))}
    assert abs(np.mean(y == 0) - p) < 0.01            # drop fraction
    assert abs(y.mean() - 1) < 0.03                   # the mean is preserved


def test_dropout_values_match_torch():
    """Same two values as PyTorch (0 and x / (1 - p)), same drop rate."""
    x = np.full((200, 50), 2.0, np.float32)
    ours = F.dropout(x, p=0.4).data
    theirs = TF.dropout(torch.tensor(x), p=0.4).numpy()
    np.testing.assert_allclose(np.unique(ours), np.unique(theirs), rtol=1e-6)
    assert abs(np.mean(ours == 0) - np.mean(theirs == 0)) < 0.03


def test_dropout2d_drops_whole_channels():
    y = F.dropout2d(np.ones((60, 50, 3, 3), np.float32), p=0.3).data
    per_channel = y.reshape(60, 50, 9)
    assert np.all(per_channel.min(axis=2) == per_channel.max(axis=2))   # all or nothing
    dropped = per_channel[:, :, 0] == 0
    assert abs(dropped.mean() - 0.3) < 0.03
    np.testing.assert_allclose(np.unique(y), [0, 1 / 0.7], rtol=1e-6)
    y3 = F.dropout2d(np.ones((40, 30, 5), np.float32), p=0.5).data        # (N, C, L)
    assert np.all(y3.min(axis=2) == y3.max(axis=2))


def test_alpha_dropout_keeps_zero_mean_unit_variance():
    x = np.random.default_rng(0).standard_normal(200_000).astype(np.float32)
    for p in (0.1, 0.5):
        y = F.alpha_dropout(x, p=p).data
        assert abs(y.mean()) < 0.01 and abs(y.std() - 1) < 0.01


def test_alpha_dropout_values_match_torch():
    x = np.full(5000, 0.5, np.float32)
    p = 0.2
    ours = np.unique(F.alpha_dropout(x, p=p).data)
    theirs = np.unique(TF.alpha_dropout(torch.tensor(x), p=p, training=True).numpy())
    np.testing.assert_allclose(ours, theirs, rtol=1e-6)
    a = ((1 - p) * (1 + p * A * A)) ** -0.5
    np.testing.assert_allclose(ours, sorted([a * (p - 1) * A, a * 0.5 + a * A * p]), rtol=1e-6)


@pytest.mark.parametrize("op,shape", OPS, ids=IDS)
def test_manual_seed_reproduces_the_mask(op, shape):
    a, b = mask_scale(op, shape, seed=7), mask_scale(op, shape, seed=7)
    np.testing.assert_array_equal(a, b)
    c = mask_scale(op, (20,) + shape[1:], seed=8)
    d = op(np.ones((20,) + shape[1:], np.float32)).data          # next draw differs
    assert not np.array_equal(c, d)


@pytest.mark.parametrize("op,shape", OPS, ids=IDS)
def test_identity_in_test_mode_and_when_not_training(op, shape):
    x = lz.Variable(rand(*shape, dtype=np.float32, seed=2))
    with lz.test_mode():
        assert op(x) is x
        assert op(x, p=0.5, training=True) is not x                # explicit flag wins
    assert op(x, training=False) is x
    assert op(x, p=0.0) is x
    y = op(x.data, training=False)
    assert isinstance(y, lz.Variable) and np.array_equal(y.data, x.data)


@pytest.mark.parametrize("op,shape", OPS, ids=IDS)
def test_p_one_gives_zeros_and_zero_gradient(op, shape):
    x = lz.Variable(rand(*shape, dtype=np.float32, seed=4))
    y = op(x, p=1.0)
    assert y.dtype == np.float32 and np.all(y.data == 0)
    y.backward(grad=np.ones(shape, np.float32))
    assert np.all(x.grad.data == 0)


@pytest.mark.parametrize("op,shape", OPS, ids=IDS)
def test_float32_in_float32_out(op, shape):
    x = lz.Variable(rand(*shape, dtype=np.float32, seed=5))
    y = op(x, p=0.25)
    y.backward(grad=np.ones(shape, np.float32))
    assert y.dtype == np.float32 and x.grad.dtype == np.float32


@pytest.mark.parametrize("call,err,match", [
    (lambda x: F.dropout(x, p=1.5), ValueError, r"dropout: dropout probability p must be in "
                                                r"\[0, 1\], got 1.5"),
    (lambda x: F.dropout(x, p=-0.1), ValueError, r"dropout: .*got -0.1"),
    (lambda x: F.alpha_dropout(x, p=2), ValueError, r"alpha_dropout: .*got 2.0"),
    (lambda x: F.dropout2d(x.reshape(2, 2, 3), p=1.01), ValueError, r"dropout2d: .*got 1.01"),
    (lambda x: F.dropout(x, p="0.5"), TypeError, r"dropout: p must be a real number.*str"),
    (lambda x: F.dropout(x, training=1), TypeError, r"dropout: training must be a bool"),
    (lambda x: F.dropout2d(x), ValueError, r"dropout2d: input must be 3-D .* got 2-D"),
    (lambda x: F.dropout(np.ones(3, np.int64)), TypeError, r"dropout: input must be floating"),
])
def test_bad_inputs(call, err, match):
    x = lz.Variable(np.ones((3, 4), np.float32))
    with pytest.raises(err, match=match):
        call(x)


def test_dropout_on_gpu(xp):
    x = lz.Variable(xp.ones((200, 100), dtype=np.float32))
    y = F.dropout(x, p=0.3)
    data = lz.cuda.as_numpy(y.data)
    assert abs(np.mean(data == 0) - 0.3) < 0.02 and y.dtype == np.float32
    y.backward(grad=xp.ones((200, 100), dtype=np.float32))
    np.testing.assert_array_equal(lz.cuda.as_numpy(x.grad.data), data)
    a = lz.cuda.as_numpy(seeded(F.alpha_dropout, p=0.3)(x).data)
    b = lz.cuda.as_numpy(seeded(F.alpha_dropout, p=0.3)(x).data)
    np.testing.assert_array_equal(a, b)
    c = lz.cuda.as_numpy(F.dropout2d(xp.ones((30, 20, 2, 2), dtype=np.float32)).data)
    assert np.all(c.min(axis=(2, 3)) == c.max(axis=(2, 3)))


def test_a_large_mask_is_kept_packed_eight_to_a_byte():
    """dropout keeps its mask for backward as bits (an eighth of a bool mask), and the
    gradient is the unpacked mask times 1/(1-p) all the same."""
    from lezero.functions.stochastic.dropouts import PACK_MIN
    lz.manual_seed(3)
    x = lz.Variable(np.ones((64, 128), np.float32))
    y = F.dropout(x, p=0.3, training=True)
    f = y.creator
    assert 64 * 128 >= PACK_MIN and f.scale is None and f.bits.nbytes == 64 * 128 // 8
    y.backward(grad=lz.Variable(np.full((64, 128), 2.0, np.float32)))
    kept = y.data != 0
    np.testing.assert_allclose(x.grad.data, np.where(kept, 2.0 / 0.7, 0.0), rtol=1e-6)
    small = F.dropout(lz.Variable(np.ones((4, 4), np.float32)), p=0.3, training=True)
    assert small.creator.bits is None and small.creator.scale.dtype == np.bool_
    with lz.using_config("tracing", True):          # a trace reads the mask itself
        traced = F.dropout(lz.Variable(np.ones((64, 128), np.float32)), p=0.3, training=True)
    assert traced.creator.bits is None and traced.creator.scale.shape == (64, 128)
