"""clip_grad_norm_ and clip_grad_value_ against torch.nn.utils."""
import numpy as np
import pytest
import torch

import lezero as lz
from lezero.optim import clip_grad_norm_, clip_grad_value_


def pair(dtype=np.float32, scale=1.0, seed=0):
    rng = np.random.default_rng(seed)
    grads = [np.asarray(scale * rng.standard_normal(s), dtype) for s in [(3, 4), (5,), ()]]
    ps = []
    for g in grads:
        p = lz.Parameter(np.zeros_like(g))
        p.grad = lz.Variable(g.copy(), requires_grad=False)
        ps.append(p)
    ts = []
    for g in grads:
        t = torch.nn.Parameter(torch.zeros(g.shape, dtype=torch.from_numpy(g).dtype))
        t.grad = torch.from_numpy(g.copy())
        ts.append(t)
    no_grad = lz.Parameter(np.zeros(2, dtype))          # skipped: it has no gradient
    return ps + [no_grad], ts + [torch.nn.Parameter(torch.zeros(2))]


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, float("inf")])
@pytest.mark.parametrize("max_norm", [0.5, 1e3])
def test_clip_grad_norm_matches_torch(norm_type, max_norm):
    ps, ts = pair()
    total = clip_grad_norm_(ps, max_norm, norm_type=norm_type)
    t_total = torch.nn.utils.clip_grad_norm_(ts, max_norm, norm_type=norm_type)
    assert total.item() == pytest.approx(t_total.item(), rel=1e-6)
    for p, t in zip(ps[:3], ts[:3]):
        np.testing.assert_allclose(p.grad.data, t.grad.numpy(), rtol=1e-6, atol=1e-7)
    clipped = [p.grad.data for p in ps[:3]]
    new_norm = np.linalg.norm(np.concatenate([g.reshape(-1) for g in clipped]).astype(np.float64),
                              ord=norm_type)
    assert new_norm <= max_norm * (1 + 1e-5)
    if max_norm > total.item():     # nothing to clip: gradients unchanged
        np.testing.assert_array_equal(ps[1].grad.data, pair()[0][1].grad.data)


def test_clip_grad_norm_single_parameter_and_no_grads():
    p = lz.Parameter(np.zeros(2, np.float32))
    p.grad = lz.Variable(np.array([3.0, 4.0], np.float32))
    total = clip_grad_norm_(p, 1.0)
    assert total.item() == pytest.approx(5.0)
    np.testing.assert_allclose(p.grad.data, [0.6, 0.8], rtol=1e-5)
    assert clip_grad_norm_([lz.Parameter(np.zeros(2))], 1.0).item() == 0.0


def test_clip_grad_norm_nonfinite():
    ps, _ = pair()
    ps[0].grad.data[0, 0] = np.nan
    with pytest.raises(RuntimeError, match="non-finite|is nan"):
        clip_grad_norm_(ps, 1.0, error_if_nonfinite=True)
    total = clip_grad_norm_(ps, 1.0)
    assert np.isnan(total.item()) and np.isnan(ps[1].grad.data).all()


def test_clip_grad_value_matches_torch():
    ps, ts = pair(scale=3.0)
    clip_grad_value_(ps, 1.5)
    torch.nn.utils.clip_grad_value_(ts, 1.5)
    for p, t in zip(ps[:3], ts[:3]):
        np.testing.assert_array_equal(p.grad.data, t.grad.numpy())
    assert np.abs(ps[0].grad.data).max() == np.float32(1.5)


def test_clip_errors():
    ps, _ = pair()
    with pytest.raises(ValueError, match="max_norm must be >= 0, got -1.0"):
        clip_grad_norm_(ps, -1)
    with pytest.raises(ValueError, match="norm_type must be positive"):
        clip_grad_norm_(ps, 1.0, norm_type=0)
    with pytest.raises(TypeError, match=r"parameters\[0\] must be a Parameter or Variable"):
        clip_grad_value_([np.zeros(2)], 1.0)
