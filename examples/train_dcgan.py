"""Train a DCGAN (PyTorch-example layout) to draw handwritten digits.

The discriminator learns to tell real digits (scaled to [-1, 1]) from the generator's;
the generator learns to fool it.  Both use Adam with beta1 = 0.5 and the DCGAN paper's
initialisation; the losses are binary cross entropies on logits.

    python examples/train_dcgan.py                        # seconds, 16x16 digits
    python examples/train_dcgan.py --image-size 32 --ngf 64 --ndf 64 --epochs 100
"""
import os

import numpy as np

import lezero.functions as F
from lezero import cuda, optim
from lezero.nn.models import DCGANDiscriminator, DCGANGenerator

from _common import (batches, check_args, digits, fit, make_parser, mean, save_image_grid,
                     to_device, write_summary)


def main():
    p = make_parser("dcgan", __doc__, epochs=12, batch_size=64, lr=1e-3)
    p.add_argument("--image-size", type=int, default=16,
                   help="8, 16 or 32 (the 8x8 digits upscaled)")
    p.add_argument("--nz", type=int, default=16, help="size of the noise vector")
    p.add_argument("--ngf", type=int, default=16, help="generator width")
    p.add_argument("--ndf", type=int, default=16, help="discriminator width")
    args = check_args(p, p.parse_args())
    import lezero as lz
    lz.manual_seed(args.seed)
    real_images = digits(True, args.image_size)[0] * 2 - 1
    gen = DCGANGenerator(args.nz, args.ngf, 1, args.image_size)
    disc = DCGANDiscriminator(1, args.ndf, args.image_size)
    opt_g = optim.Adam(gen.parameters(), lr=args.lr, betas=(0.5, 0.999))
    opt_d = optim.Adam(disc.parameters(), lr=args.lr, betas=(0.5, 0.999))
    print(f"generator {gen.num_parameters():,} and discriminator {disc.num_parameters():,} "
          f"parameters; {len(real_images)} real digits of {args.image_size}x{args.image_size}")
    bce = F.binary_cross_entropy_with_logits

    def noise(n):
        z = lz.get_rng().standard_normal((n, args.nz)).astype(np.float32)
        return to_device(args, z)

    def train_epoch(epoch):
        d_losses, g_losses, d_real = [], [], []
        for (real,) in batches((real_images,), args.batch_size, args.seed, epoch,
                               drop_last=True):
            real = to_device(args, real)
            ones = to_device(args, np.ones(len(real), np.float32))
            zeros = to_device(args, np.zeros(len(real), np.float32))
            fake = gen(noise(len(real)))
            # Discriminator: real -> 1, fake -> 0 (the fake is detached: G is not updated).
            logits_real = disc(real)
            loss_d = bce(logits_real, ones) + bce(disc(fake.detach()), zeros)
            opt_d.zero_grad()
            loss_d.backward()
            opt_d.step()
            # Generator: make the discriminator say 1 on fakes.
            loss_g = bce(disc(fake), ones)
            opt_g.zero_grad()
            loss_g.backward()
            opt_g.step()
            d_losses.append(loss_d.item())
            g_losses.append(loss_g.item())
            d_real.append(float(cuda.as_numpy(F.sigmoid(logits_real).data).mean()))
        return {"loss_d": mean(d_losses), "loss_g": mean(g_losses), "D(real)": mean(d_real)}

    history = fit(args, {"generator": gen, "discriminator": disc},
                  {"generator": opt_g, "discriminator": opt_d}, train_epoch)
    if history:
        write_summary(args, "dcgan", "generative adversarial network",
                      f"digits {args.image_size}x{args.image_size}", "D(real)",
                      history[-1]["D(real)"], sum(e["seconds"] for e in history),
                      parameters=gen.num_parameters() + disc.num_parameters(),
                      epochs=len(history))
    gen.eval()
    with lz.no_grad():
        samples = cuda.as_numpy(gen(noise(32)).data)
    path = os.path.join(args.out, "dcgan_samples.png")
    save_image_grid((samples + 1) / 2, path, "DCGAN samples after "
                    f"{args.epochs} epochs on scikit-learn's digits")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
