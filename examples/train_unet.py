"""Train a U-Net to segment generated shapes (background, rectangle, circle, triangle) and
report the intersection over union on new images.

The masks come from ``lezero.data.datasets.generate_shapes`` (deterministic by seed).
The headline figure is the mean IoU of the three shape classes over the whole test set
(the background's IoU, always high, is printed beside it but not averaged in).

    python examples/train_unet.py                       # a few minutes on one core
    python examples/train_unet.py --base-channels 32 --epochs 20
"""
import numpy as np

import lezero as lz
import lezero.functions as F
from lezero import optim
from lezero.data.datasets import ShapesSegmentation
from lezero.nn.models import UNet
from lezero.nn.models.unet import iou_per_class

from _common import batches, check_args, mean, write_summary
from _zoo import one_cycle, progress, shapes_parser, timed_fit, train_step


def predict_masks(model, x, batch_size=64):
    """Argmax class per pixel, eval mode."""
    model.eval()
    out = []
    with lz.no_grad():
        for (xb,) in batches((x,), batch_size, 0, 0, shuffle=False):
            out.append(model(xb).data.argmax(axis=1))
    model.train()
    return np.concatenate(out)


def main():
    p = shapes_parser("unet", __doc__, epochs=8, batch_size=16, lr=3e-3, train_images=1500,
                      test_images=300)
    p.add_argument("--base-channels", type=int, default=16, help="64 in the paper")
    args = check_args(p, p.parse_args())
    lz.manual_seed(args.seed)
    n_train = 3 * args.batch_size if args.smoke else args.train_images
    train = ShapesSegmentation(n_train, args.image_size, train=True, seed=args.seed)
    test = ShapesSegmentation(16 if args.smoke else args.test_images, args.image_size,
                              train=False, seed=args.seed)
    model = UNet(3, len(train.classes), base_channels=args.base_channels)
    opt = optim.Adam(model.parameters(), lr=args.lr)
    steps_per_epoch = -(-n_train // args.batch_size)
    sched = one_cycle(opt, args.epochs * steps_per_epoch)
    print(f"U-Net: {model.num_parameters():,} parameters; {n_train} training images "
          f"{args.image_size}x{args.image_size}, classes {train.classes}")

    def train_epoch(epoch):
        losses = []
        bar = progress(total=steps_per_epoch, desc=f"epoch {epoch + 1}")
        for xb, mb in batches((train.data, train.targets), args.batch_size, args.seed, epoch):
            losses.append(train_step(opt, F.cross_entropy(model(xb), mb), sched))
            bar.update()
            bar.set_postfix(loss=f"{losses[-1]:.3f}")
        bar.close()
        return {"loss": mean(losses)}

    def evaluate():
        ious = iou_per_class(predict_masks(model, test.data), test.targets, len(train.classes))
        return {"shape_mIoU": float(np.nanmean(ious[1:])),
                **{f"IoU_{c}": float(v) for c, v in zip(train.classes, ious)}}

    history, seconds = timed_fit(args, model, opt, train_epoch, evaluate, {"scheduler": sched})
    final = history[-1]
    print(f"mean IoU of the shape classes on {len(test)} new images: "
          f"{final['shape_mIoU']:.3f} (" + ", ".join(f"{c} {final[f'IoU_{c}']:.3f}"
                                                     for c in train.classes) + ")")
    write_summary(args, "unet", "semantic segmentation",
                  f"generated shapes {args.image_size}px", "mIoU", final["shape_mIoU"],
                  seconds, parameters=model.num_parameters())


if __name__ == "__main__":
    main()
