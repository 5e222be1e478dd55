"""Train a SimCLR-style encoder (Chen et al., 2020) on scikit-learn's 8x8 digits without
labels, then measure its representation with a linear probe: a logistic regression on
the frozen features, trained on the labelled training digits and tested on held-out ones.

The same probe on a randomly initialised encoder and on raw pixels is printed beside it,
so the figure says what contrastive training adds.

    python examples/train_simclr.py                   # a few minutes on one core
    python examples/train_simclr.py --temperature 0.2 --epochs 200
"""
import numpy as np

import lezero as lz
import lezero.functions as F
from lezero import nn, optim
from lezero.nn.models.simclr import DigitAugment, SimCLR, nt_xent_loss

from _common import batches, check_args, digits, make_parser, mean, write_summary
from _zoo import one_cycle, progress, timed_fit, train_step


def features(model, x):
    """Frozen encoder features (eval mode)."""
    model.eval()
    with lz.no_grad():
        h = np.concatenate([model.encoder(xb).data
                            for (xb,) in batches((x,), 512, 0, 0, shuffle=False)])
    model.train()
    return h


def linear_probe(train_x, train_y, test_x, test_y, steps=300):
    """Multinomial logistic regression on standardised features (full-batch Adam)."""
    mu, sd = train_x.mean(0), train_x.std(0) + 1e-6
    a, b = (train_x - mu) / sd, (test_x - mu) / sd
    probe = nn.Linear(a.shape[1], 10)
    opt = optim.Adam(probe.parameters(), lr=0.05, weight_decay=1e-4)
    for _ in range(steps):
        loss = F.cross_entropy(probe(a.astype(np.float32)), train_y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    with lz.no_grad():
        return float((probe(b.astype(np.float32)).data.argmax(1) == test_y).mean())


def main():
    p = make_parser("simclr", __doc__, epochs=60, batch_size=256, lr=2e-3)
    p.add_argument("--temperature", type=float, default=0.5)
    p.add_argument("--width", type=int, default=32)
    args = check_args(p, p.parse_args())
    lz.manual_seed(args.seed)
    x, t = digits(True)
    x_test, t_test = digits(False)
    model = SimCLR(1, args.width)
    random_model = SimCLR(1, args.width)                       # the baseline probe
    augment = DigitAugment()
    opt = optim.Adam(model.parameters(), lr=args.lr, weight_decay=1e-5)
    steps_per_epoch = -(-len(x) // args.batch_size)
    sched = one_cycle(opt, args.epochs * steps_per_epoch)
    print(f"SimCLR: {model.num_parameters():,} parameters; {len(x)} unlabelled digits")
    bar = progress(total=args.epochs * steps_per_epoch, desc="contrastive training")

    def train_epoch(epoch):
        rng = np.random.default_rng([args.seed, epoch, 9])
        losses = []
        for (xb,) in batches((x,), args.batch_size, args.seed, epoch, drop_last=True):
            _, z1 = model(augment(xb, rng))
            _, z2 = model(augment(xb, rng))
            losses.append(train_step(opt, nt_xent_loss(z1, z2, args.temperature), sched))
            bar.update()
            bar.set_postfix(epoch=epoch + 1, nt_xent=f"{losses[-1]:.3f}")
        return {"nt_xent": mean(losses)}

    _, seconds = timed_fit(args, model, opt, train_epoch, schedulers={"scheduler": sched})
    bar.close()
    steps = 20 if args.smoke else 300
    acc = linear_probe(features(model, x), t, features(model, x_test), t_test, steps)
    base = linear_probe(features(random_model, x), t, features(random_model, x_test), t_test,
                        steps)
    pixels = linear_probe(x.reshape(len(x), -1), t, x_test.reshape(len(x_test), -1), t_test,
                          steps)
    print(f"linear probe test accuracy: SimCLR features {acc * 100:.1f}%, random encoder "
          f"{base * 100:.1f}%, raw pixels {pixels * 100:.1f}% ({len(x_test)} test digits)")
    write_summary(args, "simclr", "self-supervised representation (linear probe)",
                  "sklearn digits 8x8", "linear_probe_acc", acc, seconds,
                  parameters=model.num_parameters(), random_encoder_acc=base,
                  pixel_probe_acc=pixels)


if __name__ == "__main__":
    main()
