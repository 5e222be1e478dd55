"""Denoising diffusion probabilistic models (Ho, Jain and Abbeel, 2020).

``GaussianDiffusion`` holds the fixed forward process and its sampler:

* a linear schedule ``beta_t`` from ``beta_start`` to ``beta_end`` over ``T`` steps
  (1e-4 .. 0.02 over 1000 in the paper), ``alpha_t = 1 - beta_t``,
  ``alpha_bar_t = prod_{s<=t} alpha_s``;
* ``q_sample(x0, t, noise) = sqrt(alpha_bar_t) x0 + sqrt(1 - alpha_bar_t) noise``;
* ``loss(model, x0)``: the paper's simplified objective, the mean squared error between
  the noise and the model's prediction of it, ``t`` uniform over the steps;
* ``sample(model, shape)``: ancestral sampling (Algorithm 2),
  ``x_{t-1} = (x_t - beta_t / sqrt(1 - alpha_bar_t) eps) / sqrt(alpha_t) + sigma_t z``
  with ``sigma_t^2 = beta_t`` (the paper's choice; ``"posterior"`` uses
  ``beta~_t = beta_t (1 - alpha_bar_{t-1}) / (1 - alpha_bar_t)``).

``DDPMUNet`` is the noise predictor: a small U-Net whose residual blocks add a sinusoidal
embedding of ``t`` (Transformer-style, through a two-layer MLP), with GroupNorm and SiLU
as in the paper's network, without its attention layers (images here are 16x16).

Steps ``t`` are 0-based here: ``t = 0`` is the first noising step (the paper's t = 1).
"""
import math

import numpy as np

import lezero as lz
import lezero.functions as F
from lezero import cuda, nn
from lezero.nn.models.registry import register_model
from lezero.utils.checks import check_array, check_choice, check_int, check_number

__all__ = ["timestep_embedding", "ResBlock", "DDPMUNet", "GaussianDiffusion"]


def timestep_embedding(t, dim, max_period=10000):
    """Sinusoidal embeddings (len(t), dim) of integer steps: ``[cos(t w_i), sin(t w_i)]``
    with ``w_i = max_period^(-i / (dim / 2))`` (the Transformer's positions), a float32
    Variable.  Computed in float64 with LeZero operators, so that a traced or exported
    model keeps ``t`` as an input instead of this call's values."""
    if not isinstance(t, lz.Variable):
        t = lz.Variable(t if isinstance(t, cuda.array_types()) else np.asarray(t),
                        requires_grad=False)
    xp = cuda.get_array_module(t.data)
    half = dim // 2
    freqs = np.exp(-math.log(max_period) * np.arange(half) / half)
    args = t.reshape(-1, 1).to(dtype=np.float64) * xp.asarray(freqs[None])
    emb = F.concatenate([F.cos(args), F.sin(args)], axis=1)
    if dim % 2:
        emb = F.pad(emb, ((0, 0), (0, 1)))
    return emb.to(dtype=np.float32)


class ResBlock(nn.Module):
    """GroupNorm-SiLU-Conv, plus the projected time embedding, GroupNorm-SiLU-Dropout-Conv,
    and a (1x1 when the width changes) shortcut."""

    def __init__(self, in_channels, out_channels, emb_dim, groups=8, dropout=0.0):
        super().__init__()
        self.norm1 = nn.GroupNorm(groups, in_channels)
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, padding=1)
        self.emb = nn.Linear(emb_dim, out_channels)
        self.norm2 = nn.GroupNorm(groups, out_channels)
        self.dropout = nn.Dropout(dropout)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, padding=1)
        self.skip = (nn.Conv2d(in_channels, out_channels, 1) if in_channels != out_channels
                     else nn.Identity())

    def forward(self, x, emb):
        h = self.conv1(F.silu(self.norm1(x)))
        h = h + self.emb(F.silu(emb)).reshape(emb.shape[0], -1, 1, 1)
        h = self.conv2(self.dropout(F.silu(self.norm2(h))))
        return self.skip(x) + h


@register_model("ddpm_unet")
class DDPMUNet(nn.Module):
    """Noise predictor ``eps(x_t, t)``: ``base_channels`` times ``channel_mult`` at each
    resolution (halved between levels by stride-2 convolutions, doubled back by
    nearest-neighbour upsampling and a convolution), ``num_res_blocks`` residual blocks per
    level on the way down and one more on the way up, skip connections concatenated."""

    def __init__(self, in_channels=1, base_channels=32, channel_mult=(1, 2, 2),
                 num_res_blocks=1, groups=8, dropout=0.0):
        super().__init__()
        where = "DDPMUNet"
        check_int(where, "in_channels", in_channels, low=1)
        c = check_int(where, "base_channels", base_channels, low=1)
        check_int(where, "num_res_blocks", num_res_blocks, low=1)
        widths = [c * check_int(where, "channel_mult", m, low=1) for m in channel_mult]
        if any(w % groups for w in widths):
            raise ValueError(f"{where}: every width {widths} must be a multiple of "
                             f"groups={groups}")
        emb_dim = 4 * c
        self.base_channels = c
        self.time_mlp = nn.Sequential(nn.Linear(c, emb_dim), nn.SiLU(),
                                      nn.Linear(emb_dim, emb_dim))
        self.inc = nn.Conv2d(in_channels, c, 3, padding=1)
        self.down, self.downsample = nn.ModuleList(), nn.ModuleList()
        skips, ch = [c], c
        for level, w in enumerate(widths):
            for _ in range(num_res_blocks):
                self.down.append(ResBlock(ch, w, emb_dim, groups, dropout))
                ch = w
                skips.append(ch)
            if level < len(widths) - 1:
                self.downsample.append(nn.Conv2d(ch, ch, 3, stride=2, padding=1))
                skips.append(ch)
        self.mid = ResBlock(ch, ch, emb_dim, groups, dropout)
        self.up, self.upsample = nn.ModuleList(), nn.ModuleList()
        for level, w in reversed(list(enumerate(widths))):
            for _ in range(num_res_blocks + 1):
                self.up.append(ResBlock(ch + skips.pop(), w, emb_dim, groups, dropout))
                ch = w
            if level > 0:
                self.upsample.append(nn.Conv2d(ch, ch, 3, padding=1))
        self.out_norm = nn.GroupNorm(groups, ch)
        self.outc = nn.Conv2d(ch, in_channels, 3, padding=1)
        self.levels, self.blocks = len(widths), num_res_blocks

    def forward(self, x, t):
        """``x`` (N, C, H, W) noisy images (H, W divisible by 2^(levels-1)), ``t`` (N,)
        integer steps -> predicted noise, shaped like ``x``."""
        check_array("DDPMUNet", "x", x)
        emb = self.time_mlp(timestep_embedding(t, self.base_channels))
        h = self.inc(x)
        hs, down = [h], iter(self.down)
        for level in range(self.levels):
            for _ in range(self.blocks):
                h = next(down)(h, emb)
                hs.append(h)
            if level < self.levels - 1:
                h = self.downsample[level](h)
                hs.append(h)
        h = self.mid(h, emb)
        up = iter(self.up)
        for level in range(self.levels):
            for _ in range(self.blocks + 1):
                h = next(up)(F.concatenate([h, hs.pop()], axis=1), emb)
            if level < self.levels - 1:
                h = self.upsample[level](F.interpolate(h, scale_factor=2, mode="nearest"))
        return self.outc(F.silu(self.out_norm(h)))


class GaussianDiffusion:
    """The DDPM forward process, training loss and ancestral sampler (see the module)."""

    def __init__(self, timesteps=1000, beta_start=1e-4, beta_end=0.02, variance="beta"):
        where = "GaussianDiffusion"
        self.timesteps = check_int(where, "timesteps", timesteps, low=1)
        beta_start = check_number(where, "beta_start", beta_start, low=0, low_open=True, high=1)
        beta_end = check_number(where, "beta_end", beta_end, low=beta_start, high=1,
                                high_open=True)
        self.variance = check_choice(where, "variance", variance, ("beta", "posterior"))
        self.betas = np.linspace(beta_start, beta_end, timesteps, dtype=np.float64)
        self.alphas = 1.0 - self.betas
        self.alphas_cumprod = np.cumprod(self.alphas)
        prev = np.concatenate([[1.0], self.alphas_cumprod[:-1]])
        self.posterior_variance = self.betas * (1 - prev) / (1 - self.alphas_cumprod)

    def _at(self, values, t, xp, ndim):
        """``values[t]`` as float32, shaped to broadcast over (N, ...)."""
        return xp.asarray(values[np.asarray(cuda.as_numpy(t))], dtype=np.float32).reshape(
            (-1,) + (1,) * (ndim - 1))

    def q_sample(self, x0, t, noise):
        """``x_t`` given ``x_0``: ``sqrt(alpha_bar_t) x0 + sqrt(1 - alpha_bar_t) noise``."""
        xp = cuda.get_array_module(x0)
        a = self._at(np.sqrt(self.alphas_cumprod), t, xp, x0.ndim)
        s = self._at(np.sqrt(1 - self.alphas_cumprod), t, xp, x0.ndim)
        return a * x0 + s * noise

    def loss(self, model, x0, rng=None):
        """The simplified objective: ``mean((noise - model(x_t, t))^2)`` for uniform ``t``
        and Gaussian noise drawn from ``rng`` (LeZero's generator by default)."""
        rng = lz.get_rng() if rng is None else rng
        xp = cuda.get_array_module(x0)
        t = rng.integers(0, self.timesteps, len(x0))
        noise = xp.asarray(rng.standard_normal(x0.shape), dtype=x0.dtype)
        return F.mse_loss(model(self.q_sample(x0, t, noise), t), noise)

    def p_sample(self, eps, x_t, t, noise):
        """One reverse step from ``x_t`` (all at step ``t``, an int) given the predicted
        noise ``eps`` and fresh Gaussian ``noise`` (unused at ``t = 0``)."""
        coef = self.betas[t] / math.sqrt(1 - self.alphas_cumprod[t])
        mean = (x_t - coef * eps) / math.sqrt(self.alphas[t])
        if t == 0:
            return mean
        var = self.betas[t] if self.variance == "beta" else self.posterior_variance[t]
        return mean + math.sqrt(var) * noise

    def sample(self, model, shape, rng=None, xp=np, callback=None):
        """Ancestral sampling of ``shape`` images from pure noise through all steps (eval
        mode, no graph); ``callback(step)`` is called after each step (a progress bar)."""
        rng = lz.get_rng() if rng is None else rng
        was_training = model.training
        model.eval()
        x = xp.asarray(rng.standard_normal(shape), dtype=np.float32)
        with lz.no_grad():
            for t in range(self.timesteps - 1, -1, -1):
                eps = model(x, np.full(shape[0], t)).data
                z = xp.asarray(rng.standard_normal(shape), dtype=np.float32)
                x = self.p_sample(eps, x, t, z).astype(np.float32)
                if callback is not None:
                    callback(t)
        model.train(was_training)
        return x
