"""LeZero's autocast against torch.autocast on the CPU: same dtypes, same forward bits."""
import numpy as np
import pytest
import torch

import lezero as lz
import lezero.functions as F
from lezero import amp, nn


def _pair():
    torch.manual_seed(0)
    tm = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8),
                             torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(8 * 36, 10))
    lm = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                       nn.Flatten(), nn.Linear(8 * 36, 10))
    lm.load_state_dict({k: v.detach().numpy().copy() for k, v in tm.state_dict().items()})
    return tm, lm


def _within_ulps(expected, got, dtype, ulps=2):
    """Each stage sums in float32 and rounds to ``dtype``: another summation order may
    round an element the other way (one ulp), and that ulp reaches the next stage.  So
    equal within ``ulps`` units of ``dtype``'s epsilon, relative to the element and to the
    stage's mean magnitude (an ulp carried into a value near zero)."""
    eps = float(np.finfo(dtype).eps) if np.dtype(dtype).kind == "f" else 2.0 ** -7
    scale = ulps * eps
    atol = scale * float(np.abs(expected).mean())
    np.testing.assert_allclose(got, expected, rtol=scale, atol=atol)
    return scale * float(np.abs(expected).max()) + atol     # the largest difference allowed


def _rel(a, b):
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


@pytest.mark.parametrize("name, tol", [("float16", 2e-3), ("bfloat16", 1e-2)])
def test_conv_batchnorm_linear_matches_torch_autocast(name, tol):
    if name == "bfloat16":
        pytest.importorskip("ml_dtypes")
    tm, lm = _pair()
    x = np.random.default_rng(0).standard_normal((4, 3, 6, 6)).astype(np.float32)
    t = np.array([1, 2, 3, 4])
    xt = torch.tensor(x, requires_grad=True)
    with torch.autocast("cpu", dtype=getattr(torch, name)):
        th = [tm[0](xt)]
        for m in tm[1:]:
            th.append(m(th[-1]))
        tloss = torch.nn.functional.cross_entropy(th[-1], torch.tensor(t))
    tloss.backward()
    xl = lz.Variable(x)
    with amp.autocast(name):
        lh = [lm[0](xl)]
        for m in list(lm.children())[1:]:
            lh.append(m(lh[-1]))
        lloss = F.cross_entropy(lh[-1], t)
    lloss.backward()
    for a, b in zip(th, lh):            # conv, batch norm, relu, flatten, linear
        assert str(a.dtype).split(".")[1] == b.dtype.name
        logit_tol = _within_ulps(a.detach().float().numpy(), b.data.astype(np.float32),
                                 b.dtype)
    assert lloss.dtype == np.float32
    # a mean cross-entropy moves by at most 2 * max |change of a logit| (|dL/dz| sums to
    # at most 2/N over a row), so the logits' allowance bounds the loss's
    assert lloss.item() == pytest.approx(tloss.item(), rel=1e-6, abs=2 * logit_tol)
    for (n, p), q in zip(tm.named_parameters(), lm.parameters()):
        assert q.grad.dtype == np.float32
        assert _rel(q.grad.data, p.grad.numpy()) < tol or \
            np.abs(q.grad.data - p.grad.numpy()).max() < 1e-4, n
    assert _rel(xl.grad.data, xt.grad.numpy()) < tol


def test_matmul_and_losses_match_torch():
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((5, 7)).astype(np.float32), rng.standard_normal((7, 3))
    b = b.astype(np.float32)
    target = rng.standard_normal((5, 3)).astype(np.float32)
    ta, tb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    with torch.autocast("cpu", dtype=torch.float16):
        tp = ta @ tb
        tl = torch.nn.functional.mse_loss(tp, torch.tensor(target))
    tl.backward()
    la, lb = lz.Variable(a), lz.Variable(b)
    with amp.autocast():
        lp = F.matmul(la, lb)
        ll = F.mse_loss(lp, target)
    ll.backward()
    assert lp.dtype == np.float16 and tp.dtype == torch.float16
    np.testing.assert_array_equal(lp.data, tp.detach().numpy())
    assert tl.dtype == torch.float32 and ll.dtype == np.float32
    assert ll.item() == pytest.approx(tl.item(), rel=1e-6)
    np.testing.assert_allclose(la.grad.data, ta.grad.numpy(), rtol=2e-3, atol=2e-4)
    np.testing.assert_allclose(lb.grad.data, tb.grad.numpy(), rtol=2e-3, atol=2e-4)
