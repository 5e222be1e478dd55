"""SimCLR-style contrastive learning (Chen et al., 2020) for small grey images.

* ``DigitAugment``: the random views: an affine warp (rotation, scale, shift: the
  crop-and-resize of the paper for 8x8 digits), contrast and brightness jitter, Gaussian
  noise and a random erased square, all vectorised over the batch;
* ``SimCLR``: ``encoder`` (a small CNN with global average pooling: the representation
  ``h``) and ``projector`` (a 2-layer MLP: ``z``, the space of the loss);
* ``nt_xent_loss(z1, z2, temperature)``: the normalised-temperature cross entropy over
  the 2N views of a batch: each view's positive is the other view of its image, the other
  2N - 2 views are its negatives.

After training, ``h`` is read by a linear classifier (the linear probe).
"""
import numpy as np

import lezero.functions as F
from lezero import cuda, nn
from lezero.nn.models.registry import register_model
from lezero.utils.checks import check_int, check_number

__all__ = ["DigitAugment", "SimCLR", "nt_xent_loss"]


class DigitAugment:
    """Random views of (N, 1, H, W) images in [0, 1] (NumPy; ``rng`` a Generator)."""

    def __init__(self, degrees=15.0, scale=(0.85, 1.15), translate=1.0, jitter=0.3,
                 noise=0.05, erase=3):
        self.degrees, self.scale, self.translate = degrees, scale, translate
        self.jitter, self.noise, self.erase = jitter, noise, erase

    @staticmethod
    def warp(x, angle, scale, shift):
        """Bilinear affine warp of each image about its centre, zeros outside: image ``i``
        rotated by ``angle[i]`` radians, scaled by ``scale[i]``, moved by ``shift[i]``
        (x, y) pixels."""
        n, c, h, w = x.shape
        yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
        cy, cx = (h - 1) / 2, (w - 1) / 2
        # where each output pixel samples the input: the inverse rotation and scale
        cos = (np.cos(angle) / scale)[:, None, None]
        sin = (np.sin(angle) / scale)[:, None, None]
        dx, dy = xx[None] - cx - shift[:, 0, None, None], yy[None] - cy - shift[:, 1, None, None]
        src_x, src_y = cos * dx - sin * dy + cx, sin * dx + cos * dy + cy
        x0, y0 = np.floor(src_x).astype(np.int64), np.floor(src_y).astype(np.int64)
        fx, fy = src_x - x0, src_y - y0
        out = np.zeros((n, c, h, w))
        rows = np.arange(n)[:, None, None]
        for oy, ox, weight in ((0, 0, (1 - fx) * (1 - fy)), (0, 1, fx * (1 - fy)),
                               (1, 0, (1 - fx) * fy), (1, 1, fx * fy)):
            px, py = x0 + ox, y0 + oy
            inside = (px >= 0) & (px < w) & (py >= 0) & (py < h)
            vals = x[rows, :, np.clip(py, 0, h - 1), np.clip(px, 0, w - 1)]  # (n, h, w, c)
            out += np.moveaxis(vals * (weight * inside)[..., None], -1, 1)
        return out

    def __call__(self, x, rng):
        x = np.asarray(cuda.as_numpy(x), dtype=np.float64)
        n, _, h, w = x.shape
        x = self.warp(x, np.deg2rad(rng.uniform(-self.degrees, self.degrees, n)),
                      rng.uniform(*self.scale, n),
                      rng.uniform(-self.translate, self.translate, (n, 2)))
        contrast = rng.uniform(1 - self.jitter, 1 + self.jitter, (n, 1, 1, 1))
        brightness = rng.uniform(-self.jitter / 2, self.jitter / 2, (n, 1, 1, 1))
        x = x * contrast + brightness + self.noise * rng.standard_normal(x.shape)
        if self.erase:
            k = self.erase
            top, left = rng.integers(0, h - k + 1, n), rng.integers(0, w - k + 1, n)
            rows = rng.random(n) < 0.5                    # erase in half the views
            for i in np.nonzero(rows)[0]:
                x[i, :, top[i]:top[i] + k, left[i]:left[i] + k] = 0
        return np.clip(x, 0, 1).astype(np.float32)


def _conv_bn(c_in, c_out, stride):
    return nn.Sequential(nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False),
                         nn.BatchNorm2d(c_out), nn.ReLU())


@register_model("simclr")
class SimCLR(nn.Module):
    """``encoder``: three 3x3 Conv-BN-ReLU blocks (``width``, 2x, 4x channels; the last
    two stride 2) and global average pooling -> ``h`` (4 * width); ``projector``:
    Linear-ReLU-Linear -> ``z`` (``proj_dim``).  ``forward(x) -> (h, z)``."""

    def __init__(self, in_channels=1, width=32, proj_dim=64):
        super().__init__()
        check_int("SimCLR", "in_channels", in_channels, low=1)
        w = check_int("SimCLR", "width", width, low=1)
        check_int("SimCLR", "proj_dim", proj_dim, low=1)
        self.feature_dim = 4 * w
        self.encoder = nn.Sequential(_conv_bn(in_channels, w, 1), _conv_bn(w, 2 * w, 2),
                                     _conv_bn(2 * w, 4 * w, 2), nn.AdaptiveAvgPool2d(1),
                                     nn.Flatten())
        self.projector = nn.Sequential(nn.Linear(4 * w, 4 * w), nn.ReLU(),
                                       nn.Linear(4 * w, proj_dim))

    def forward(self, x):
        h = self.encoder(x)
        return h, self.projector(h)


def nt_xent_loss(z1, z2, temperature=0.5):
    """NT-Xent over two views (N, d) each: cosine similarities / ``temperature`` between
    all 2N projections, self-similarity excluded, cross entropy towards each view's
    partner, averaged over the 2N views."""
    temperature = check_number("nt_xent_loss", "temperature", temperature, low=0,
                               low_open=True)
    if z1.shape != z2.shape or len(z1.shape) != 2:
        raise ValueError(f"nt_xent_loss: z1 and z2 must both be (N, d), got {z1.shape} "
                         f"and {z2.shape}")
    n = z1.shape[0]
    z = F.normalize(F.concatenate([z1, z2], axis=0), axis=1)
    sim = F.matmul(z, z.T) / temperature
    xp = cuda.get_array_module(sim.data)
    sim = F.masked_fill(sim, xp.eye(2 * n, dtype=bool), -1e9)
    targets = xp.concatenate([xp.arange(n, 2 * n), xp.arange(0, n)])
    return F.cross_entropy(sim, targets)

