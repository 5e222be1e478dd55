"""Generated shapes: images of coloured rectangles, circles and triangles with their boxes,
classes and per-pixel masks, for detection (``ShapesDetection``) and segmentation
(``ShapesSegmentation``).

Everything is drawn by NumPy from one seed, so ``generate_shapes(n, seed=s)`` gives the
same images on every machine and nothing is downloaded.  Each image has a random
background colour with a little noise and 1 to ``max_objects`` shapes of random colour
(kept apart from the background's) and size; a new shape may cover part of an older one
but their boxes overlap by IoU at most ``max_overlap``.  A shape's box is the tight box of
the pixels it finally covers, so boxes and masks agree; a shape left with fewer than 4
visible pixels gets no box (its fragment stays in the image and the mask).
"""
import numpy as np

from lezero.data.datasets.toy import ArrayDataset
from lezero.utils.checks import check_int, check_number

__all__ = ["SHAPE_CLASSES", "generate_shapes", "ShapesDetection", "ShapesSegmentation"]

SHAPE_CLASSES = ("rectangle", "circle", "triangle")


def _shape_mask(kind, x0, y0, w, h, rng, yy, xx):
    """Boolean (H, W) mask of one shape inside the box (x0, y0, w, h), pixel centres."""
    px, py = xx + 0.5, yy + 0.5
    if kind == 0:                                  # axis-aligned rectangle
        return (px >= x0) & (px < x0 + w) & (py >= y0) & (py < y0 + h)
    if kind == 1:                                  # circle (w == h)
        r = w / 2
        return (px - x0 - r) ** 2 + (py - y0 - r) ** 2 <= r * r
    # triangle: apex somewhere on the top edge, base along the bottom edge
    apex = (x0 + rng.uniform(0.2, 0.8) * w, y0)
    corners = [apex, (x0 + w, y0 + h), (x0, y0 + h)]
    signs = []
    for (ax, ay), (bx, by) in zip(corners, corners[1:] + corners[:1]):
        signs.append((bx - ax) * (py - ay) - (by - ay) * (px - ax) >= 0)
    return signs[0] & signs[1] & signs[2]


def _box_iou(a, b):
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    area = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / area if area > 0 else 0.0


def _draw_image(rng, size, max_objects, min_size, max_size, max_overlap):
    """One image: (3, H, W) float32, boxes (k, 4) xyxy, labels (k,), mask (H, W)."""
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32)
    background = rng.uniform(0.0, 1.0, size=3).astype(np.float32)
    image = np.broadcast_to(background[:, None, None], (3, size, size)).copy()
    mask = np.zeros((size, size), dtype=np.int64)  # 0 background, 1 + class inside shapes
    owner = np.full((size, size), -1, dtype=np.int64)
    placed, kinds = [], []
    for _ in range(int(rng.integers(1, max_objects + 1))):
        for _attempt in range(20):                 # find a place that hides no one
            kind = int(rng.integers(len(SHAPE_CLASSES)))
            w = rng.uniform(min_size, max_size)
            h = w if kind == 1 else rng.uniform(min_size, max_size)
            x0, y0 = rng.uniform(0, size - w), rng.uniform(0, size - h)
            box = (x0, y0, x0 + w, y0 + h)
            if all(_box_iou(box, p) <= max_overlap for p in placed):
                break
        else:
            continue
        colour = rng.uniform(0.0, 1.0, size=3).astype(np.float32)
        while np.abs(colour - background).max() < 0.35:   # visible against the background
            colour = rng.uniform(0.0, 1.0, size=3).astype(np.float32)
        inside = _shape_mask(kind, x0, y0, w, h, rng, yy, xx)
        image[:, inside] = colour[:, None]
        mask[inside] = kind + 1
        owner[inside] = len(placed)
        placed.append(box)
        kinds.append(kind)
    boxes, labels = [], []
    for i, kind in enumerate(kinds):               # tight boxes of what stays visible
        ys, xs = np.nonzero(owner == i)
        if len(xs) < 4:
            continue
        boxes.append([xs.min(), ys.min(), xs.max() + 1, ys.max() + 1])
        labels.append(kind)
    image += rng.normal(0.0, 0.03, size=image.shape).astype(np.float32)
    return (np.clip(image, 0.0, 1.0), np.asarray(boxes, dtype=np.float32).reshape(-1, 4),
            np.asarray(labels, dtype=np.int64), mask)


def generate_shapes(n, size=64, max_objects=3, min_size=None, max_size=None,
                    max_overlap=0.2, seed=0):
    """``n`` generated images: ``(images, boxes, labels, masks)``.

    ``images`` float32 (n, 3, size, size) in [0, 1]; ``boxes`` a list of float32 (k, 4)
    arrays in pixels, ``(x1, y1, x2, y2)``; ``labels`` a list of int64 (k,) class indices
    into ``SHAPE_CLASSES``; ``masks`` int64 (n, size, size) with 0 for background and
    ``1 + class`` on a shape's pixels.  Shapes span ``min_size``..``max_size`` pixels
    (default size/6 .. size/2.5)."""
    where = "generate_shapes"
    n = check_int(where, "n", n, low=1)
    size = check_int(where, "size", size, low=16)
    max_objects = check_int(where, "max_objects", max_objects, low=1)
    min_size = check_number(where, "min_size", size / 6 if min_size is None else min_size,
                            low=3)
    max_size = check_number(where, "max_size", size / 2.5 if max_size is None else max_size,
                            low=min_size, high=size)
    max_overlap = check_number(where, "max_overlap", max_overlap, low=0, high=1)
    seed = check_int(where, "seed", seed, low=0)
    rng = np.random.default_rng([seed, size, max_objects])
    images = np.empty((n, 3, size, size), dtype=np.float32)
    masks = np.empty((n, size, size), dtype=np.int64)
    boxes, labels = [], []
    for i in range(n):
        images[i], b, c, masks[i] = _draw_image(rng, size, max_objects, min_size, max_size,
                                                max_overlap)
        boxes.append(b)
        labels.append(c)
    return images, boxes, labels, masks


class ShapesDetection(ArrayDataset):
    """Generated detection set: sample ``i`` is ``(image (3, S, S), target)`` with
    ``target = {"boxes": (k, 4) xyxy pixels, "labels": (k,)}`` (torchvision's format).

    ``train=True`` and ``False`` draw from different seeds (``seed`` and ``seed + 1``), so
    the test images are new ones.  ``classes`` names the labels."""

    classes = SHAPE_CLASSES

    def __init__(self, n=1000, size=64, train=True, max_objects=3, seed=0, transform=None):
        images, boxes, labels, _ = generate_shapes(n, size, max_objects,
                                                   seed=2 * seed + (0 if train else 1))
        self.boxes, self.labels = boxes, labels
        targets = [{"boxes": b, "labels": c} for b, c in zip(boxes, labels)]
        super().__init__(images, targets, transform)


class ShapesSegmentation(ArrayDataset):
    """Generated segmentation set: sample ``i`` is ``(image (3, S, S), mask (S, S))``,
    the mask holding 0 for background and ``1 + class`` on each shape (4 classes)."""

    classes = ("background",) + SHAPE_CLASSES

    def __init__(self, n=1000, size=64, train=True, max_objects=3, seed=0, transform=None):
        images, _, _, masks = generate_shapes(n, size, max_objects,
                                              seed=2 * seed + (0 if train else 1))
        super().__init__(images, masks, transform)
