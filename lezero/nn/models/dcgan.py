"""DCGAN (Radford et al., 2015): a generator of transposed convolutions and a
convolutional discriminator, both with batch norm, in the layout of PyTorch's
``examples/dcgan`` (``main.0``, ``main.1``, ...) for any power-of-two image size >= 8.

At ``image_size=64`` the layers and their indices are exactly the example's.  The one
difference: the discriminator returns logits (the example's final ``Sigmoid`` has no
parameters, and ``F.binary_cross_entropy_with_logits`` on logits is the stable form of
its ``BCELoss``).
"""
import math

import lezero.functions as F
from lezero import nn


def _stages(image_size, who):
    n = int(math.log2(image_size)) if image_size > 0 else 0
    if image_size < 8 or 2 ** n != image_size:
        raise ValueError(f"{who}: image_size must be a power of two >= 8, got {image_size}")
    return n - 2          # 4x4 -> image_size takes n - 2 doublings


def dcgan_weights_init(m):
    """The DCGAN paper's initialisation: convolutions N(0, 0.02); batch-norm scales
    N(1, 0.02), shifts 0.  Use as ``model.apply(dcgan_weights_init)``."""
    if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d)):
        nn.init.normal_(m.weight, 0.0, 0.02)
    elif isinstance(m, nn.BatchNorm2d):
        nn.init.normal_(m.weight, 1.0, 0.02)
        nn.init.zeros_(m.bias)


class DCGANGenerator(nn.Module):
    """z (N, nz) or (N, nz, 1, 1) -> images (N, nc, image_size, image_size) in [-1, 1].

    A 4x4 start with ``ngf * 2**(stages-1)`` channels, then each transposed convolution
    doubles the size and halves the channels; Tanh at the end."""

    def __init__(self, nz=100, ngf=64, nc=3, image_size=64):
        super().__init__()
        stages = _stages(image_size, "DCGANGenerator")
        self.nz = nz
        width = ngf * 2 ** (stages - 1)
        layers = [nn.ConvTranspose2d(nz, width, 4, 1, 0, bias=False), nn.BatchNorm2d(width),
                  nn.ReLU(True)]
        for _ in range(stages - 1):
            layers += [nn.ConvTranspose2d(width, width // 2, 4, 2, 1, bias=False),
                       nn.BatchNorm2d(width // 2), nn.ReLU(True)]
            width //= 2
        layers += [nn.ConvTranspose2d(width, nc, 4, 2, 1, bias=False), nn.Tanh()]
        self.main = nn.Sequential(*layers)
        self.apply(dcgan_weights_init)

    def forward(self, z):
        if z.ndim == 2:
            z = F.reshape(z, z.shape + (1, 1))
        return self.main(z)


class DCGANDiscriminator(nn.Module):
    """images (N, nc, image_size, image_size) -> one real/fake logit per image (N,).

    Strided 4x4 convolutions halve the size and double the channels (LeakyReLU 0.2, batch
    norm after all but the first) down to 4x4, then a 4x4 convolution to one number."""

    def __init__(self, nc=3, ndf=64, image_size=64):
        super().__init__()
        stages = _stages(image_size, "DCGANDiscriminator")
        layers = [nn.Conv2d(nc, ndf, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True)]
        width = ndf
        for _ in range(stages - 1):
            layers += [nn.Conv2d(width, width * 2, 4, 2, 1, bias=False),
                       nn.BatchNorm2d(width * 2), nn.LeakyReLU(0.2, inplace=True)]
            width *= 2
        layers.append(nn.Conv2d(width, 1, 4, 1, 0, bias=False))
        self.main = nn.Sequential(*layers)
        self.apply(dcgan_weights_init)

    def forward(self, x):
        return F.reshape(self.main(x), (-1,))
