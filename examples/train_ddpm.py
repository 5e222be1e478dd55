"""Train a DDPM (Ho et al., 2020) on scikit-learn's 8x8 handwritten digits, sample new
digits by ancestral sampling and measure them with a digit classifier.

The quality figure is a "digit score" in the manner of the Inception Score:
``exp(E_x KL(p(y|x) || p(y)))`` with ``p(y|x)`` from a LeNet-5 trained here on the real
digits.  It is 10 when every sample is one confident digit and the ten classes are
equally frequent, 1 for samples that look like nothing in particular; the same score of
the real test digits is printed beside it as the ceiling, and the test-set noise
prediction loss as a second figure.  A grid of samples is saved as ``OUT/samples.png``.

    python examples/train_ddpm.py                      # several minutes on one core
    python examples/train_ddpm.py --base-channels 32 --epochs 300
"""
import os

import numpy as np

import lezero as lz
import lezero.functions as F
from lezero import optim
from lezero.nn.models import LeNet5
from lezero.nn.models.ddpm import DDPMUNet, GaussianDiffusion

from _common import (batches, check_args, digits, make_parser, mean, save_image_grid,
                     write_summary)
from _zoo import EMA, one_cycle, progress, timed_fit, train_step


def train_classifier(x, t, x_test, t_test, epochs, seed):
    """LeNet-5 on the real digits in [-1, 1]; returns it (eval mode) and its accuracy."""
    net = LeNet5(10, 1, 8)
    opt = optim.Adam(net.parameters(), lr=2e-3)
    for epoch in range(epochs):
        for xb, tb in batches((x, t), 64, seed, epoch):
            loss = F.cross_entropy(net(xb), tb)
            opt.zero_grad()
            loss.backward()
            opt.step()
    net.eval()
    with lz.no_grad():
        acc = float((net(x_test).data.argmax(axis=1) == t_test).mean())
    return net, acc


def digit_score(classifier, images):
    """``exp(mean KL(p(y|x) || p(y)))`` and the share of images classified with
    probability above 0.9."""
    with lz.no_grad():
        p = F.softmax(classifier(images), axis=1).data.astype(np.float64)
    marginal = p.mean(axis=0, keepdims=True)
    kl = (p * (np.log(p + 1e-12) - np.log(marginal + 1e-12))).sum(axis=1)
    return float(np.exp(kl.mean())), float((p.max(axis=1) > 0.9).mean())


def sample(diffusion, model, n, seed):
    """``n`` 8x8 samples by ancestral sampling through every step, with a progress bar."""
    bar = progress(total=diffusion.timesteps, desc="sampling")
    out = diffusion.sample(model, (n, 1, 8, 8), np.random.default_rng(seed),
                           callback=lambda step: bar.update())
    bar.close()
    return out


def main():
    p = make_parser("ddpm", __doc__, epochs=100, batch_size=128, lr=2e-3)
    p.add_argument("--base-channels", type=int, default=16)
    p.add_argument("--timesteps", type=int, default=1000, help="T (1000 in the paper)")
    p.add_argument("--samples", type=int, default=100, help="images to sample at the end")
    args = check_args(p, p.parse_args())
    lz.manual_seed(args.seed)
    x, t = digits(True)
    x_test, t_test = digits(False)
    x, x_test = x * 2 - 1, x_test * 2 - 1                      # pixels in [-1, 1]
    if args.smoke:                  # a quick check: small batches, a few held-out digits
        args.batch_size = min(args.batch_size, 32)
        x_test, t_test = x_test[:64], t_test[:64]
    timesteps = 20 if args.smoke else args.timesteps
    diffusion = GaussianDiffusion(timesteps)
    model = DDPMUNet(1, args.base_channels, (1, 2, 2))
    opt = optim.Adam(model.parameters(), lr=args.lr)
    steps_per_epoch = -(-len(x) // args.batch_size)
    sched = one_cycle(opt, args.epochs * steps_per_epoch, warmup=0.02)
    ema = EMA(model, decay=0.995, ramp=100)
    print(f"DDPM U-Net: {model.num_parameters():,} parameters; {len(x)} digits 8x8, "
          f"T={timesteps}")
    bar = progress(total=args.epochs * steps_per_epoch, desc="training")

    def train_epoch(epoch):
        losses = []
        for (xb,) in batches((x,), args.batch_size, args.seed, epoch):
            losses.append(train_step(opt, diffusion.loss(model, xb), sched, ema=ema))
            bar.update()
            bar.set_postfix(epoch=epoch + 1, loss=f"{losses[-1]:.4f}")
        return {"loss": mean(losses)}

    def evaluate():                 # the noise-prediction loss on held-out digits
        ema.swap()
        model.eval()
        with lz.no_grad():
            value = diffusion.loss(model, x_test, np.random.default_rng(0)).item()
        model.train()
        ema.swap()
        return {"test_loss": value}

    history, seconds = timed_fit(args, model, opt, train_epoch, evaluate,
                                 {"scheduler": sched, "ema": ema})
    bar.close()
    ema.swap()
    model.save(os.path.join(args.out, "model.npz"))
    n = 8 if args.smoke else args.samples
    samples = sample(diffusion, model, n, args.seed)
    classifier, acc = train_classifier(x, t, x_test, t_test, 1 if args.smoke else 30, args.seed)
    score, confident = digit_score(classifier, np.clip(samples, -1, 1))
    real_score, real_confident = digit_score(classifier, x_test)
    path = os.path.join(args.out, "samples.png")
    save_image_grid((np.clip(samples[:64], -1, 1) + 1) / 2, path,
                    f"DDPM samples (digit score {score:.2f})")
    print(f"digit score of {n} samples: {score:.2f} ({confident * 100:.0f}% classified with "
          f"p > 0.9); real test digits: {real_score:.2f} ({real_confident * 100:.0f}%); "
          f"classifier test accuracy {acc * 100:.1f}%; test noise loss "
          f"{history[-1]['test_loss']:.4f}; wrote {path}")
    write_summary(args, "ddpm_unet", "image generation (DDPM)", "sklearn digits 8x8",
                  "digit_score", score, seconds, parameters=model.num_parameters(),
                  real_digit_score=real_score, confident_share=confident,
                  test_loss=history[-1]["test_loss"])


if __name__ == "__main__":
    main()
