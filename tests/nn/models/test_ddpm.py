"""DDPM: the schedule, the forward process and the reverse step against the paper's closed
forms; the sampler driven by exact noise predictors (a point mass comes back exactly, a
Gaussian comes back with its mean and spread); the U-Net against a PyTorch twin."""
import math

import numpy as np
import pytest
import torch

import lezero as lz
from lezero import nn
from lezero.nn.models import DDPMUNet, GaussianDiffusion, get_model
from lezero.nn.models.ddpm import timestep_embedding

from tests.nn.models._helpers import assert_grads_close, torch_state

tnn = torch.nn


def test_linear_schedule_and_q_sample():
    d = GaussianDiffusion(1000)
    assert d.betas[0] == pytest.approx(1e-4) and d.betas[-1] == pytest.approx(0.02)
    assert d.alphas_cumprod[9] == pytest.approx(np.prod(1 - np.linspace(1e-4, 0.02, 1000)[:10]))
    assert d.alphas_cumprod[-1] < 1e-4                     # x_T is almost pure noise
    x0 = np.full((2, 1, 2, 2), 0.5, np.float32)
    noise = np.ones_like(x0)
    xt = d.q_sample(x0, np.array([0, 999]), noise)
    for i, t in enumerate((0, 999)):
        ab = d.alphas_cumprod[t]
        np.testing.assert_allclose(xt[i], math.sqrt(ab) * 0.5 + math.sqrt(1 - ab), rtol=1e-6)


def test_reverse_mean_equals_the_true_posterior_mean():
    """With the exact noise of x_t, the step's mean is mu~(x_t, x_0) = sqrt(ab_{t-1})
    beta_t / (1 - ab_t) x_0 + sqrt(alpha_t) (1 - ab_{t-1}) / (1 - ab_t) x_t (eq. 7)."""
    d = GaussianDiffusion(100)
    rng = np.random.default_rng(0)
    x0, noise = rng.standard_normal((2, 5)), rng.standard_normal((2, 5))
    for t in (1, 40, 99):
        xt = d.q_sample(x0, np.array([t, t]), noise)
        ab, ab_prev, beta = d.alphas_cumprod[t], d.alphas_cumprod[t - 1], d.betas[t]
        want = (math.sqrt(ab_prev) * beta / (1 - ab) * x0
                + math.sqrt(1 - beta) * (1 - ab_prev) / (1 - ab) * xt)
        np.testing.assert_allclose(d.p_sample(noise, xt, t, np.zeros_like(xt)), want,
                                   rtol=1e-5, atol=1e-6)
    assert d.posterior_variance[1] == pytest.approx(
        d.betas[1] * (1 - d.alphas_cumprod[0]) / (1 - d.alphas_cumprod[1]))


class Oracle(nn.Module):
    """The exact E[noise | x_t] for data x0 ~ N(mu, s^2) (s = 0: a point mass)."""

    def __init__(self, diffusion, mu, s):
        super().__init__()
        self.d, self.mu, self.s = diffusion, mu, s

    def forward(self, x, t):
        ab = self.d.alphas_cumprod[t[0]]
        return lz.Variable((math.sqrt(1 - ab) * (x - math.sqrt(ab) * self.mu)
                            / (ab * self.s ** 2 + 1 - ab)).astype(np.float32))


def test_sampling_with_exact_noise_predictors_recovers_the_data():
    d = GaussianDiffusion(50, variance="posterior")
    x = d.sample(Oracle(d, 0.7, 0.0), (3, 1, 2, 2), np.random.default_rng(0))
    np.testing.assert_allclose(x, 0.7, atol=1e-4)        # a point mass comes back exactly
    d = GaussianDiffusion(1000)      # (fewer steps would leave x_T far from N(0, 1))
    x = d.sample(Oracle(d, 1.5, 0.5), (4000,), np.random.default_rng(1))
    assert abs(x.mean() - 1.5) < 0.03 and abs(x.std() - 0.5) < 0.05


def test_loss_is_the_noise_mse():
    d = GaussianDiffusion(10)

    class Zero(nn.Module):
        def forward(self, x, t):
            return lz.Variable(np.zeros_like(x))
    x0 = np.zeros((3, 1, 4, 4), np.float32)
    loss = d.loss(Zero(), x0, np.random.default_rng(5))
    rng = np.random.default_rng(5)
    rng.integers(0, 10, 3)
    noise = rng.standard_normal(x0.shape).astype(np.float32)
    assert loss.item() == pytest.approx(float((noise ** 2).mean()), rel=1e-6)


def test_timestep_embedding_by_hand():
    e = timestep_embedding([0, 3], 6)
    np.testing.assert_allclose(e[0], [1, 1, 1, 0, 0, 0], atol=1e-7)
    w = [1.0, 10000 ** (-1 / 3), 10000 ** (-2 / 3)]
    np.testing.assert_allclose(e[1], [math.cos(3 * v) for v in w] + [math.sin(3 * v) for v in w],
                               rtol=1e-6)


# ----- the U-Net against a twin ---------------------------------------------------------

def t_embedding(t, dim):
    half = dim // 2
    freqs = torch.exp(-math.log(10000) * torch.arange(half, dtype=torch.float64) / half)
    args = t.double()[:, None] * freqs[None]
    return torch.cat([args.cos(), args.sin()], 1).float()


class TRes(tnn.Module):
    def __init__(self, cin, cout, emb):
        super().__init__()
        self.norm1, self.conv1 = tnn.GroupNorm(4, cin), tnn.Conv2d(cin, cout, 3, padding=1)
        self.emb, self.norm2 = tnn.Linear(emb, cout), tnn.GroupNorm(4, cout)
        self.conv2 = tnn.Conv2d(cout, cout, 3, padding=1)
        self.skip = tnn.Conv2d(cin, cout, 1) if cin != cout else tnn.Identity()

    def forward(self, x, e):
        f = tnn.functional.silu
        h = self.conv1(f(self.norm1(x))) + self.emb(f(e))[:, :, None, None]
        return self.skip(x) + self.conv2(f(self.norm2(h)))


class TUNet(tnn.Module):
    """Base 8, widths (8, 16), one block per level: written out by hand."""

    def __init__(self):
        super().__init__()
        self.time_mlp = tnn.Sequential(tnn.Linear(8, 32), tnn.SiLU(), tnn.Linear(32, 32))
        self.inc = tnn.Conv2d(1, 8, 3, padding=1)
        self.down = tnn.ModuleList([TRes(8, 8, 32), TRes(8, 16, 32)])
        self.downsample = tnn.ModuleList([tnn.Conv2d(8, 8, 3, stride=2, padding=1)])
        self.mid = TRes(16, 16, 32)
        self.up = tnn.ModuleList([TRes(32, 16, 32), TRes(16 + 8, 16, 32),
                                  TRes(16 + 8, 8, 32), TRes(8 + 8, 8, 32)])
        self.upsample = tnn.ModuleList([tnn.Conv2d(16, 16, 3, padding=1)])
        self.out_norm, self.outc = tnn.GroupNorm(4, 8), tnn.Conv2d(8, 1, 3, padding=1)

    def forward(self, x, t):
        e = self.time_mlp(t_embedding(t, 8))
        h0 = self.inc(x)
        h1 = self.down[0](h0, e)
        h2 = self.downsample[0](h1)
        h3 = self.down[1](h2, e)
        h = self.mid(h3, e)
        h = self.up[0](torch.cat([h, h3], 1), e)
        h = self.up[1](torch.cat([h, h2], 1), e)
        h = self.upsample[0](tnn.functional.interpolate(h, scale_factor=2, mode="nearest"))
        h = self.up[2](torch.cat([h, h1], 1), e)
        h = self.up[3](torch.cat([h, h0], 1), e)
        return self.outc(tnn.functional.silu(self.out_norm(h)))


def test_ddpm_unet_matches_the_twin():
    torch.manual_seed(0)
    ref = TUNet()
    model = get_model("ddpm_unet", in_channels=1, base_channels=8, channel_mult=(1, 2),
                      groups=4)
    assert list(model.state_dict()) == list(ref.state_dict())
    model.load_state_dict(torch_state(ref))
    x = np.random.default_rng(0).standard_normal((3, 1, 8, 8)).astype(np.float32)
    t = np.array([0, 17, 999])
    y = model(x, t)
    ty = ref(torch.from_numpy(x), torch.from_numpy(t))
    np.testing.assert_allclose(y.data, ty.detach().numpy(), rtol=1e-4, atol=1e-5)
    (y ** 2).sum().backward()
    (ty ** 2).sum().backward()
    assert_grads_close(model, ref, ("time_mlp.0.weight", "down.1.emb.weight",
                                    "up.3.conv2.weight"), rel_atol=1e-4)


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="DDPMUNet: every width"):
        DDPMUNet(1, 12, (1, 2), groups=8)
    with pytest.raises(ValueError, match="GaussianDiffusion: variance must be one of"):
        GaussianDiffusion(variance="learned")
    with pytest.raises(ValueError, match="GaussianDiffusion: beta_end must be"):
        GaussianDiffusion(beta_start=0.1, beta_end=0.01)
