"""dropout1d and dropout3d: whole channels dropped, 1/(1-p) scale, batched and unbatched
layouts, modes, gradients, reproducibility, errors, the Dropout1d/Dropout3d modules."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import lezero as lz
import lezero.functions as F
from lezero import nn
from tests.functions.stochastic.test_dropout import mask_scale, seeded
from lezero.testing import check_all, rand

# (operator, batched shape, unbatched shape)
OPS = [(F.dropout1d, (3, 4, 5), (4, 5)), (F.dropout3d, (2, 3, 2, 3, 2), (3, 2, 3, 2))]
IDS = ["dropout1d", "dropout3d"]


def _per_channel(y, lead):
    """y as (channels, positions): one row per index of the first ``lead`` axes."""
    return y.reshape(int(np.prod(y.shape[:lead])), -1)


@pytest.mark.parametrize("op,batched,unbatched", OPS, ids=IDS)
@pytest.mark.parametrize("p", [0.2, 0.6])
def test_whole_channels_are_zeroed_and_the_rest_scaled(op, batched, unbatched, p):
    for shape, lead in ((batched, 2), (unbatched, 1)):
        big = (400,) + shape[1:] if lead == 2 else (4000,) + shape[1:]
        y = op(np.ones(big, np.float32), p=p).data
        rows = _per_channel(y, lead)
        assert np.all(rows.min(axis=1) == rows.max(axis=1))     # all or nothing
        assert abs(np.mean(rows[:, 0] == 0) - p) < 0.04         # drop rate
        np.testing.assert_allclose(np.unique(y), [0, 1 / (1 - p)], rtol=1e-6)
        assert y.dtype == np.float32


def test_values_and_rate_match_torch():
    x = np.full((300, 20, 4), 3.0, np.float32)
    ours = F.dropout1d(x, p=0.3).data
    theirs = TF.dropout1d(torch.tensor(x), p=0.3).numpy()
    np.testing.assert_allclose(np.unique(ours), np.unique(theirs), rtol=1e-6)
    assert abs(np.mean(ours == 0) - np.mean(theirs == 0)) < 0.03
    x3 = np.full((40, 30, 2, 2, 2), 3.0, np.float32)
    ours3, theirs3 = F.dropout3d(x3, p=0.3).data, TF.dropout3d(torch.tensor(x3), p=0.3)
    np.testing.assert_allclose(np.unique(ours3), np.unique(theirs3.numpy()), rtol=1e-6)


@pytest.mark.parametrize("op,batched,unbatched", OPS, ids=IDS)
@pytest.mark.parametrize("layout", ["batched", "unbatched"])
def test_gradient_is_the_mask_times_the_scale(op, batched, unbatched, layout):
    shape = batched if layout == "batched" else unbatched
    p = 0.4
    scale = mask_scale(op, shape, p=p)
    x = rand(*shape, seed=1)
    check_all(seeded(op, p=p), lambda t: t * torch.tensor(scale), x)
    v = lz.Variable(x.astype(np.float32))
    (g,) = lz.grad(seeded(op, p=p)(v), [v], grad_outputs=np.ones(shape, np.float32))
    np.testing.assert_allclose(g.data, scale, rtol=1e-6)


@pytest.mark.parametrize("op,batched,unbatched", OPS, ids=IDS)
def test_manual_seed_reproduces_the_mask(op, batched, unbatched):
    a, b = mask_scale(op, batched, seed=11), mask_scale(op, batched, seed=11)
    np.testing.assert_array_equal(a, b)
    big = (64,) + batched[1:]
    c = mask_scale(op, big, seed=12)
    assert not np.array_equal(c, op(np.ones(big, np.float32)).data)     # next draw differs


def test_same_generator_as_dropout2d():
    """dropout1d of (N, C, L) draws exactly the mask dropout2d draws for it."""
    shape = (6, 5, 7)
    np.testing.assert_array_equal(mask_scale(F.dropout1d, shape, seed=4, p=0.5),
                                  mask_scale(F.dropout2d, shape, seed=4, p=0.5))


@pytest.mark.parametrize("op,batched,unbatched", OPS, ids=IDS)
def test_identity_in_test_mode_and_when_not_training(op, batched, unbatched):
    x = lz.Variable(rand(*batched, dtype=np.float32, seed=2))
    with lz.test_mode():
        assert op(x) is x
        assert op(x, p=0.5, training=True) is not x
    assert op(x, training=False) is x
    assert op(x, p=0.0) is x
    y = op(x.data, training=False)
    assert isinstance(y, lz.Variable) and np.array_equal(y.data, x.data)


@pytest.mark.parametrize("op,batched,unbatched", OPS, ids=IDS)
def test_p_one_gives_zeros_and_zero_gradient(op, batched, unbatched):
    x = lz.Variable(rand(*unbatched, dtype=np.float32, seed=4))
    y = op(x, p=1.0)
    assert np.all(y.data == 0) and y.dtype == np.float32
    y.backward(grad=np.ones(unbatched, np.float32))
    assert np.all(x.grad.data == 0)


@pytest.mark.parametrize("call,err,match", [
    (lambda: F.dropout1d(np.ones((2, 3, 4), np.float32), p=1.5), ValueError,
     r"dropout1d: .*got 1.5"),
    (lambda: F.dropout3d(np.ones((2, 3, 4, 4), np.float32), p=-0.2), ValueError,
     r"dropout3d: .*got -0.2"),
    (lambda: F.dropout1d(np.ones((2, 3, 4), np.float32), p="x"), TypeError,
     r"dropout1d: p must be a real number"),
    (lambda: F.dropout1d(np.ones(4, np.float32)), ValueError,
     r"dropout1d: input must be 2-D \(C, L\) or 3-D \(N, C, L\), got 1-D with shape \(4,\)"),
    (lambda: F.dropout1d(np.ones((1, 2, 3, 4), np.float32)), ValueError,
     r"dropout1d: .*got 4-D"),
    (lambda: F.dropout3d(np.ones((2, 3, 4), np.float32)), ValueError,
     r"dropout3d: input must be 4-D \(C, D, H, W\) or 5-D \(N, C, D, H, W\), got 3-D"),
    (lambda: F.dropout3d(np.ones((1,) * 6, np.float32)), ValueError, r"dropout3d: .*got 6-D"),
    (lambda: F.dropout1d(np.ones((2, 3), np.float32), inplace=1), TypeError,
     r"dropout1d: inplace must be a bool"),
    (lambda: F.dropout3d(np.ones((2, 3, 4, 4), np.float32), training="yes"), TypeError,
     r"dropout3d: training must be a bool"),
    (lambda: F.dropout1d(np.ones((2, 3), np.int64)), TypeError,
     r"dropout1d: input must be floating"),
])
def test_bad_inputs(call, err, match):
    with pytest.raises(err, match=match):
        call()


@pytest.mark.parametrize("cls,shape", [(nn.Dropout1d, (50, 8, 3)), (nn.Dropout1d, (60, 3)),
                                       (nn.Dropout3d, (40, 6, 2, 2, 2)),
                                       (nn.Dropout3d, (60, 2, 2, 2))])
def test_modules_drop_channels_in_training_and_pass_through_in_eval(cls, shape):
    m = cls(p=0.5)
    assert repr(m) == f"{cls.__name__}(p=0.5, inplace=False)"
    x = lz.Variable(np.ones(shape, np.float32))
    lead = 1 if len(shape) in (2, 4) else 2
    rows = _per_channel(m(x).data, lead)
    assert np.all(rows.min(axis=1) == rows.max(axis=1)) and np.any(rows == 0)
    m.eval()
    assert m(x) is x


def test_module_errors_name_the_layer():
    with pytest.raises(ValueError, match=r"Dropout3d: p must be in \[0.0, 1.0\]"):
        nn.Dropout3d(p=2)
    with pytest.raises(ValueError, match=r"Dropout1d: dropout1d: input must be 2-D"):
        nn.Dropout1d()(np.ones(5, np.float32))


def test_on_gpu(xp):
    x = lz.Variable(xp.ones((30, 20, 2, 2, 2), dtype=np.float32))
    y = F.dropout3d(x, p=0.3)
    data = lz.cuda.as_numpy(y.data)
    rows = _per_channel(data, 2)
    assert np.all(rows.min(axis=1) == rows.max(axis=1))
    y.backward(grad=xp.ones(x.shape, dtype=np.float32))
    np.testing.assert_array_equal(lz.cuda.as_numpy(x.grad.data), data)
    c = lz.cuda.as_numpy(F.dropout1d(xp.ones((40, 5), dtype=np.float32)).data)
    assert np.all(c.min(axis=1) == c.max(axis=1))
