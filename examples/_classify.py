"""Image classification shared by the MLP, LeNet, VGG, ResNet and MobileNet examples.

Data: scikit-learn's digits by default (real, shipped, seconds to train), upscaled and
replicated to the size and channels the model wants; ``--data cifar10`` for real runs
(``--download`` fetches it once into ``$LEZERO_DATA``).  Optimizer: SGD with Nesterov
momentum and weight decay, or Adam(W); a cosine schedule stepped per batch.
"""
import lezero.functions as F
from lezero import optim

import _common
from _amp import Precision, add_memory_flags
from _common import (accuracy, bar, batches, check_args, cifar10, digits, fit, make_parser,
                     mean, to_device, write_summary)


def classifier_parser(name, description, epochs=3, batch_size=64, lr=0.05,
                      image_size=32, channels=3):
    p = make_parser(name, description, epochs, batch_size, lr)
    p.add_argument("--data", choices=("digits", "cifar10"), default="digits",
                   help="digits: scikit-learn's 8x8 digits upscaled; cifar10: 32x32 colour")
    p.add_argument("--download", action="store_true", help="download CIFAR-10 if missing")
    p.add_argument("--image-size", type=int, default=image_size,
                   help="digits are upscaled to this size (a multiple of 8)")
    p.add_argument("--channels", type=int, default=channels, choices=(1, 3),
                   help="digits are replicated to this many channels")
    p.add_argument("--limit", type=int, default=None,
                   help="train on the first N images only (quick runs)")
    p.add_argument("--optimizer", choices=("sgd", "adamw"), default="sgd")
    p.add_argument("--weight-decay", type=float, default=5e-4,
                   help="L2 penalty (decoupled for AdamW)")
    return add_memory_flags(p)


def load_data(args):
    """((x_train, t_train), (x_test, t_test)) as float32 NCHW arrays and int64 labels."""
    if args.data == "cifar10":
        train, test = cifar10(True, args.download), cifar10(False, args.download)
    else:
        train = digits(True, args.image_size, args.channels)
        test = digits(False, args.image_size, args.channels)
    if args.limit:
        train = tuple(a[:args.limit] for a in train)
    return train, test


def run_classifier(parser, build_model, name=None):
    """Parse flags, build ``build_model(args, num_classes)``, train and report."""
    args = check_args(parser, parser.parse_args())
    import lezero as lz
    lz.manual_seed(args.seed)
    train, test = load_data(args)
    model = build_model(args, 10)
    name = name or getattr(args, "arch", None) or type(model).__name__.lower()
    return train_classifier(args, model, train, test, name)


def _progress(total, desc):
    """A bar over an epoch's steps (on a terminal only; see ``_common.bar``)."""
    return bar(total=total, desc=desc, unit="step", leave=False)


def recalibrate_batch_norm(model, x, args, batch_size=64):
    """"Precise BN": recompute every batch norm's running statistics as the plain average
    over the training images ``x`` (the weights fixed), instead of the moving average
    taken while the weights changed.  Short runs of the mobile networks (MobileNetV3's
    momentum is 0.01) otherwise evaluate at chance with their training batches learnt --
    in PyTorch as in LeZero."""
    import lezero as lz
    from lezero import nn
    norms = [m for m in model.modules()
             if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d))
             and m.track_running_stats]
    model.eval()
    momenta = [m.momentum for m in norms]
    for m in norms:
        m.reset_running_stats()
        m.momentum = None                    # a cumulative average over the batches below
        m.train()
    with lz.no_grad():
        for (xb,) in batches((x,), batch_size, 0, 0, shuffle=False):
            model(to_device(args, xb))
    for m, momentum in zip(norms, momenta):
        m.momentum = momentum
    model.eval()


def train_classifier(args, model, train, test, name, precise_bn=False):
    """Train ``model`` on ``train`` = (x, t), report accuracy on ``test`` after every
    epoch (after ``recalibrate_batch_norm`` with ``precise_bn``), print the final figure
    and record it in ``OUT/summary.json``."""
    (x, t) = train
    print(f"{name} ({type(model).__name__}): {model.num_parameters():,} parameters; "
          f"{len(x)} training images of shape {x.shape[1:]} ({args.data})")
    if args.optimizer == "sgd":
        opt = optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, nesterov=True,
                        weight_decay=args.weight_decay)
    else:
        opt = optim.AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    steps_per_epoch = -(-len(x) // args.batch_size)
    sched = optim.lr_scheduler.CosineAnnealingLR(opt, T_max=args.epochs * steps_per_epoch)
    mp = Precision(args, model)
    seen_at_most = _common.SMOKE_BATCHES * args.batch_size

    def train_epoch(epoch):
        losses, correct, seen = [], 0, 0
        with _progress(steps_per_epoch, f"{name} epoch {epoch + 1}") as steps:
            for xb, tb in batches((x, t), args.batch_size, args.seed, epoch):
                xb, tb_dev = to_device(args, xb, tb)
                with mp.autocast():
                    logits = model(xb)
                    loss = F.cross_entropy(logits, tb_dev)
                opt.zero_grad()
                mp.backward(loss)
                mp.step(opt, scheduler=sched)
                losses.append(loss.item())
                correct += int((logits.data.argmax(axis=1) == tb_dev).sum())
                seen += len(tb)                 # --smoke sees a few batches only
                steps.update()
                steps.set_postfix(loss=f"{losses[-1]:.3f}")
        return {"loss": mean(losses), "train_acc": correct / seen}

    def evaluate():
        if precise_bn:                          # --smoke: over the images it trained on
            recalibrate_batch_norm(model, x[:seen_at_most] if args.smoke else x, args)
        return {"test_acc": accuracy(model, *test, args)}

    history = fit(args, {"model": model}, {"optimizer": opt}, train_epoch, evaluate,
                  {"scheduler": sched, **mp.state()})
    if history:
        acc = history[-1]["test_acc"]
        print(f"final test accuracy {acc * 100:.2f}%")
        write_summary(args, name, "image classification", _data_name(args, x, test[0]),
                      "test_acc", acc, sum(h["seconds"] for h in history),
                      parameters=model.num_parameters(), epochs=len(history),
                      precise_bn=precise_bn)
    return model, history


def _data_name(args, x, x_test):
    size = x.shape[-1]
    kind = ("CIFAR-10" if args.data == "cifar10" else
            "digits 8x8" if size == 8 else f"digits upscaled to {size}x{size}")
    return f"{kind} ({len(x)} train / {len(x_test)} test)"
