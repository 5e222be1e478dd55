"""Train a variational autoencoder on scikit-learn's handwritten digits (8x8 pixels)
and draw reconstructions and samples from the prior.

The loss is the negative ELBO per image: Bernoulli cross entropy of the reconstruction
plus the KL divergence of q(z|x) from N(0, I).  The pixels (0..16 levels / 16) serve as
Bernoulli probabilities.

    python examples/train_vae.py                          # seconds
    python examples/train_vae.py --latent 2 --epochs 200  # a 2-D latent space to plot
"""
import os

import numpy as np

from lezero import cuda, optim
from lezero.nn.models import VAE, vae_loss

from _common import (batches, check_args, digits, fit, make_parser, mean, save_image_grid,
                     to_device, write_summary)


def main():
    p = make_parser("vae", __doc__, epochs=100, batch_size=64, lr=2e-3)
    p.add_argument("--hidden", type=int, default=128,
                   help="width of the encoder and decoder layers")
    p.add_argument("--latent", type=int, default=8,
                   help="size of z")
    args = check_args(p, p.parse_args())
    import lezero as lz
    lz.manual_seed(args.seed)
    x_train, _ = digits(True)
    x_test, _ = digits(False)
    model = VAE(in_features=64, hidden=args.hidden, latent=args.latent)
    opt = optim.Adam(model.parameters(), lr=args.lr)
    print(f"VAE: {model.num_parameters():,} parameters, latent size {args.latent}")

    def elbo_loss(x):
        recon, mu, logvar = model(x)
        return vae_loss(recon, x, mu, logvar) / len(x)

    def train_epoch(epoch):
        losses = []
        for (xb,) in batches((x_train,), args.batch_size, args.seed, epoch):
            loss = elbo_loss(to_device(args, xb))
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return {"neg_elbo": mean(losses)}

    def evaluate():
        with lz.no_grad():      # training mode: sample z, so this is the ELBO estimate
            return {"test_neg_elbo": elbo_loss(to_device(args, x_test)).item()}

    history = fit(args, {"model": model}, {"optimizer": opt}, train_epoch, evaluate)
    if history:
        write_summary(args, "vae", "variational autoencoder", "digits 8x8", "test_neg_elbo",
                      history[-1]["test_neg_elbo"], sum(e["seconds"] for e in history),
                      parameters=model.num_parameters(), epochs=len(history))
    model.eval()
    with lz.no_grad():
        recon = model.decode(model.encode(to_device(args, x_test[:16]))[0]).data
        xp = cuda.get_array_module(recon)
        z = xp.asarray(lz.get_rng().standard_normal((16, args.latent)), dtype=np.float32)
        samples = model.decode(z).data
    grid = np.concatenate([x_test[:16], cuda.as_numpy(recon).reshape(16, 1, 8, 8),
                           cuda.as_numpy(samples).reshape(16, 1, 8, 8)])
    path = os.path.join(args.out, "vae_digits.png")
    save_image_grid(grid, path, "rows 1-2: test digits; 3-4: reconstructions; "
                                "5-6: samples from the prior")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
