"""Train a YOLOv5-n detector on generated shapes (rectangles, circles, triangles) and
report mAP@0.5 on new images.

The images come from ``lezero.data.datasets.generate_shapes`` (deterministic by seed,
nothing downloaded); anchors are fitted to the training boxes by k-means.  Training uses
YOLOv5's loss (CIoU box, objectness and class BCE), AdamW with warm-up and cosine decay,
horizontal flips and an exponential moving average of the weights (evaluated and saved).

    python examples/train_yolo.py                      # a few minutes on one core
    python examples/train_yolo.py --image-size 96 --epochs 30
"""
import os

import numpy as np

import lezero as lz
from lezero import optim
from lezero.data.datasets import SHAPE_CLASSES, generate_shapes
from lezero.nn.models import yolov5n
from lezero.nn.models.detection_metrics import mean_average_precision
from lezero.nn.models.yolo_loss import YOLOLoss, kmeans_anchors, targets_to_array

from _common import batches, check_args, mean, smoke_limit, write_summary
from _zoo import EMA, one_cycle, progress, shapes_parser, timed_fit, train_step


def flip(images, boxes, rng):
    """Mirror a random half of the images left-right, boxes with them."""
    images, boxes = images.copy(), [b.copy() for b in boxes]
    size = images.shape[-1]
    for i in np.nonzero(rng.random(len(images)) < 0.5)[0]:
        images[i] = images[i, :, :, ::-1]
        boxes[i][:, [0, 2]] = size - boxes[i][:, [2, 0]]
    return images, boxes


def evaluate_map(model, images, boxes, labels, batch_size=64):
    """mAP@0.5 over a set (confidence threshold 0.001, NMS IoU 0.6, as YOLOv5's val)."""
    detections = []
    for i in smoke_limit(range(0, len(images), batch_size)):
        detections += model.predict(images[i:i + batch_size], conf_thres=0.001, iou_thres=0.6)
    n = len(detections)
    return mean_average_precision(detections, list(zip(boxes[:n], labels[:n])),
                                  len(SHAPE_CLASSES))


def main():
    p = shapes_parser("yolo", __doc__, epochs=10, batch_size=32, lr=2e-3, train_images=2000,
                      test_images=500)
    args = check_args(p, p.parse_args())
    lz.manual_seed(args.seed)
    n_train = 3 * args.batch_size if args.smoke else args.train_images
    x, boxes, labels, _ = generate_shapes(n_train, args.image_size, seed=2 * args.seed)
    xt, boxes_t, labels_t, _ = generate_shapes(32 if args.smoke else args.test_images,
                                               args.image_size, seed=2 * args.seed + 1)
    anchors = kmeans_anchors(np.concatenate([b[:, 2:] - b[:, :2] for b in boxes]))
    model = yolov5n(num_classes=len(SHAPE_CLASSES), anchors=anchors,
                    image_size=args.image_size)
    loss_fn = YOLOLoss(model)
    opt = optim.AdamW(model.parameters(), lr=args.lr, weight_decay=5e-4)
    steps_per_epoch = -(-n_train // args.batch_size)
    sched = one_cycle(opt, args.epochs * steps_per_epoch)
    ema = EMA(model)
    print(f"YOLOv5-n: {model.num_parameters():,} parameters; {n_train} training images "
          f"{args.image_size}x{args.image_size}, anchors {anchors}")
    index = np.arange(n_train)

    def train_epoch(epoch):
        rng = np.random.default_rng([args.seed, epoch, 1])
        parts = {"box": [], "obj": [], "cls": []}
        bar = progress(total=min(steps_per_epoch, 3 if args.smoke else steps_per_epoch),
                       desc=f"epoch {epoch + 1}")
        for (ib,) in batches((index,), args.batch_size, args.seed, epoch):
            xb, bb = flip(x[ib], [boxes[i] for i in ib], rng)
            loss, got = loss_fn(model(xb), targets_to_array(bb, [labels[i] for i in ib]))
            value = train_step(opt, loss, sched, ema=ema)
            for k, v in got.items():
                parts[k].append(v)
            bar.update()
            bar.set_postfix(loss=f"{value / len(ib):.3f}")
        bar.close()
        return {f"loss_{k}": mean(v) for k, v in parts.items()}

    def evaluate():
        ema.swap()
        value, per_class = evaluate_map(model, xt, boxes_t, labels_t)
        ema.swap()
        return {"mAP@0.5": value, **{f"AP_{c}": ap for c, ap in zip(SHAPE_CLASSES, per_class)}}

    history, seconds = timed_fit(args, model, opt, train_epoch, evaluate,
                                 {"scheduler": sched, "ema": ema})
    ema.swap()                                   # keep the averaged weights
    model.save(os.path.join(args.out, "model.npz"))
    final = history[-1]
    print(f"mAP@0.5 on {len(xt)} new images: {final['mAP@0.5']:.3f} ("
          + ", ".join(f"{c} {final[f'AP_{c}'] or 0:.3f}" for c in SHAPE_CLASSES) + ")")
    write_summary(args, "yolov5n", "object detection", f"generated shapes {args.image_size}px",
                  "mAP@0.5", final["mAP@0.5"], seconds,
                  parameters=model.num_parameters())


if __name__ == "__main__":
    main()
