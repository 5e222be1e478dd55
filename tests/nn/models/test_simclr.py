"""SimCLR: NT-Xent by hand and against a torch computation (value and gradient), the
affine warp against SciPy, the augmentation's identity setting, and the network against
a PyTorch twin."""
import math

import numpy as np
import pytest
import torch
from scipy import ndimage

import lezero as lz
from lezero.nn.models import SimCLR, get_model
from lezero.nn.models.simclr import DigitAugment, nt_xent_loss


def test_nt_xent_by_hand():
    # one image: its two views are each other's only candidate -> probability 1, loss 0
    z = np.array([[1.0, 2.0]], np.float32)
    assert nt_xent_loss(z, 2 * z).item() == pytest.approx(0.0, abs=1e-6)
    # two images, views identical, images orthogonal: for each view the logits over the
    # three others are (1, 0, 0) / t -> loss = -log(e^(1/t) / (e^(1/t) + 2))
    z = np.eye(2, dtype=np.float32)
    t = 0.5
    want = -math.log(math.exp(1 / t) / (math.exp(1 / t) + 2))
    assert nt_xent_loss(z, z, t).item() == pytest.approx(want, rel=1e-6)
    with pytest.raises(ValueError, match=r"nt_xent_loss: z1 and z2 must both be \(N, d\)"):
        nt_xent_loss(z, z[:1])


def test_nt_xent_matches_torch_with_gradients():
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((6, 5)).astype(np.float32) for _ in range(2))
    za, zb = lz.Variable(a), lz.Variable(b)
    loss = nt_xent_loss(za, zb, 0.3)
    loss.backward()
    ta, tb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    z = torch.nn.functional.normalize(torch.cat([ta, tb]), dim=1)
    sim = (z @ z.T / 0.3).masked_fill(torch.eye(12, dtype=torch.bool), float("-inf"))
    target = torch.cat([torch.arange(6, 12), torch.arange(0, 6)])
    tl = torch.nn.functional.cross_entropy(sim, target)
    tl.backward()
    assert loss.item() == pytest.approx(tl.item(), rel=1e-5)
    np.testing.assert_allclose(za.grad.data, ta.grad.numpy(), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(zb.grad.data, tb.grad.numpy(), rtol=1e-4, atol=1e-6)


def test_warp_matches_scipy_affine_transform():
    rng = np.random.default_rng(1)
    x = rng.random((3, 1, 8, 8))
    angle, scale = np.array([0.3, -0.2, 0.0]), np.array([1.1, 0.9, 1.0])
    shift = np.array([[0.5, -1.0], [0.0, 0.7], [1.0, 0.0]])
    got = DigitAugment.warp(x, angle, scale, shift)
    c = 3.5
    for i in range(3):
        m = np.array([[math.cos(angle[i]), math.sin(angle[i])],
                      [-math.sin(angle[i]), math.cos(angle[i])]]) / scale[i]
        # output (y, x) samples input m @ ((y, x) - centre - shift) + centre; beyond the
        # edge the image is zero-padded (SciPy's grid-constant mode)
        offset = np.array([c, c]) - m @ (np.array([c, c]) + shift[i, ::-1])
        want = ndimage.affine_transform(x[i, 0], m, offset, order=1, mode="grid-constant")
        np.testing.assert_allclose(got[i, 0], want, atol=1e-9)
    np.testing.assert_allclose(got[2, 0, :, 1:], x[2, 0, :, :-1])   # a one-pixel shift right


def test_augment_identity_setting_and_randomness():
    x = np.random.default_rng(2).random((4, 1, 8, 8)).astype(np.float32)
    same = DigitAugment(degrees=0, scale=(1, 1), translate=0, jitter=0, noise=0, erase=0)
    np.testing.assert_allclose(same(x, np.random.default_rng(0)), x, atol=1e-6)
    aug = DigitAugment()
    v1, v2 = aug(x, np.random.default_rng(0)), aug(x, np.random.default_rng(0))
    assert np.array_equal(v1, v2) and v1.dtype == np.float32
    assert not np.allclose(v1, aug(x, np.random.default_rng(1)))
    assert v1.min() >= 0 and v1.max() <= 1


def test_simclr_matches_a_torch_twin():
    tnn = torch.nn

    def block(cin, cout, s):
        return tnn.Sequential(tnn.Conv2d(cin, cout, 3, s, 1, bias=False), tnn.BatchNorm2d(cout),
                              tnn.ReLU())
    torch.manual_seed(0)
    enc = tnn.Sequential(block(1, 4, 1), block(4, 8, 2), block(8, 16, 2),
                         tnn.AdaptiveAvgPool2d(1), tnn.Flatten())
    proj = tnn.Sequential(tnn.Linear(16, 16), tnn.ReLU(), tnn.Linear(16, 6))
    model = get_model("simclr", width=4, proj_dim=6)
    state = {**{f"encoder.{k}": v for k, v in enc.state_dict().items()},
             **{f"projector.{k}": v for k, v in proj.state_dict().items()}}
    assert sorted(model.state_dict()) == sorted(state)
    model.load_state_dict({k: v.numpy().copy() for k, v in state.items()})
    x = np.random.default_rng(3).random((5, 1, 8, 8)).astype(np.float32)
    h, z = model(x)
    th = enc(torch.from_numpy(x))
    tz = proj(th)
    np.testing.assert_allclose(h.data, th.detach().numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(z.data, tz.detach().numpy(), rtol=1e-4, atol=1e-5)
    (z * z).sum().backward()
    (tz * tz).sum().backward()
    np.testing.assert_allclose(model.encoder[0][0].weight.grad.data, enc[0][0].weight.grad.numpy(),
                               rtol=1e-3, atol=1e-5)
    assert isinstance(model, SimCLR) and model.feature_dim == 16
