"""Image classification shared by the MLP, LeNet, VGG, ResNet and MobileNet examples.

Data: scikit-learn's digits by default (real, shipped, seconds to train), upscaled and
replicated to the size and channels the model wants; ``--data cifar10`` for real runs
(``--download`` fetches it once into ``$LEZERO_DATA``).  Optimizer: SGD with Nesterov
momentum and weight decay, or Adam(W); a cosine schedule stepped per batch.
"""
import lezero.functions as F
from lezero import optim

from _amp import Precision, add_memory_flags
from _common import (accuracy, batches, check_args, cifar10, digits, fit, make_parser,
                     mean, to_device)


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


def run_classifier(parser, build_model):
    """Parse flags, build ``build_model(args, num_classes)``, train and report."""
    args = check_args(parser, parser.parse_args())
    import lezero as lz
    lz.manual_seed(args.seed)
    (x, t), test = load_data(args)
    model = build_model(args, 10)
    print(f"{type(model).__name__}: {model.num_parameters():,} parameters; "
          f"{len(x)} training images of shape {x.shape[1:]} ({args.data})")
    if args.optimizer == "sgd":
        opt = optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, nesterov=True,
                        weight_decay=args.weight_decay)
    else:
        opt = optim.AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    steps = args.epochs * -(-len(x) // args.batch_size)
    sched = optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps)
    mp = Precision(args, model)

    def train_epoch(epoch):
        losses, correct = [], 0
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
        return {"loss": mean(losses), "train_acc": correct / len(x)}

    def evaluate():
        return {"test_acc": accuracy(model, *test, args)}

    history = fit(args, {"model": model}, {"optimizer": opt}, train_epoch, evaluate,
                  {"scheduler": sched, **mp.state()})
    if history:
        print(f"final test accuracy {history[-1]['test_acc'] * 100:.2f}%")
    return model, history
