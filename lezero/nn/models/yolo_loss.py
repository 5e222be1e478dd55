"""YOLOv5's training loss, its target assignment and anchor fitting.

``YOLOLoss(model)(raw, targets)`` is Ultralytics' ``ComputeLoss``:

* **assignment** (``build_targets``): a ground-truth box is matched to every anchor of a
  level whose width and height are both within a factor ``anchor_t`` (4) of the box's,
  in the cell holding its centre and in the two neighbouring cells nearest to the centre
  (so each box gets up to three cells per anchor: more positives, faster training);
* **box**: ``1 - CIoU`` (or GIoU) between the decoded prediction
  ``xy = 2 sigmoid(t) - 0.5``, ``wh = (2 sigmoid(t))^2 * anchor`` and the box, averaged
  over the matches;
* **objectness**: BCE with logits over every cell and anchor, the target being the
  (detached, clipped at 0) IoU of the match (0 elsewhere), levels weighted 4, 1, 0.4;
* **class**: BCE with logits of the matched cells against one-hot classes.

The total is ``(box * lbox + obj * lobj + cls * lcls) * batch_size``, returned with its
three parts (floats) for logging.
"""
import numpy as np

import lezero.functions as F
from lezero import cuda
from lezero.nn.models.boxes import bbox_iou, xyxy_to_xywh
from lezero.utils.checks import check_choice, check_int, check_number

__all__ = ["YOLOLoss", "targets_to_array", "build_targets", "kmeans_anchors"]

_OFFSETS = np.array([[0, 0], [1, 0], [0, 1], [-1, 0], [0, -1]], dtype=np.float32)


def targets_to_array(boxes, labels):
    """Per-image box lists -> one (n, 6) float32 array of ``(image, class, cx, cy, w, h)``
    in pixels.  ``boxes[i]`` is (k, 4) xyxy, ``labels[i]`` (k,)."""
    rows = []
    for i, (b, c) in enumerate(zip(boxes, labels)):
        b = np.asarray(cuda.as_numpy(b), dtype=np.float32).reshape(-1, 4)
        c = np.asarray(cuda.as_numpy(c), dtype=np.float32).reshape(-1, 1)
        rows.append(np.concatenate([np.full_like(c, i), c, xyxy_to_xywh(b)], axis=1))
    return np.concatenate(rows) if rows else np.zeros((0, 6), dtype=np.float32)


def _level_matches(t, anchors, shape, anchor_t, g=0.5):
    """Matches of targets ``t`` ((n, 6), grid units) to one level's ``anchors`` (na, 2)."""
    na, (h, w) = len(anchors), shape
    if not len(t):
        return None
    ai = np.repeat(np.arange(na), len(t))
    tt = np.tile(t, (na, 1))
    ratio = tt[:, 4:6] / anchors[ai]
    keep = np.maximum(ratio, 1 / ratio).max(axis=1) < anchor_t
    tt, ai = tt[keep], ai[keep]
    gxy = tt[:, 2:4]
    gxi = np.array([w, h], dtype=np.float32) - gxy
    j, k = ((gxy % 1 < g) & (gxy > 1)).T          # left / top neighbour is close
    l, m = ((gxi % 1 < g) & (gxi > 1)).T          # right / bottom neighbour is close
    use = np.stack([np.ones_like(j), j, k, l, m])  # (5, n)
    tt = np.broadcast_to(tt, (5,) + tt.shape)[use]
    ai = np.broadcast_to(ai, (5,) + ai.shape)[use]
    offsets = np.broadcast_to(_OFFSETS[:, None] * g, (5, len(gxy), 2))[use]
    gij = np.floor(tt[:, 2:4] - offsets).astype(np.int64)
    gi, gj = np.clip(gij[:, 0], 0, w - 1), np.clip(gij[:, 1], 0, h - 1)
    tbox = np.concatenate([tt[:, 2:4] - np.stack([gi, gj], axis=1), tt[:, 4:6]], axis=1)
    return (tt[:, 0].astype(np.int64), ai, gj, gi), tbox.astype(np.float32), \
        anchors[ai], tt[:, 1].astype(np.int64)


def build_targets(targets, anchors, strides, shapes, anchor_t=4.0):
    """For each level: ``(indices (b, a, gj, gi), tbox (m, 4) xywh in grid units relative
    to the cell, anchors (m, 2) grid units, classes (m,))`` or None when nothing matches.

    ``targets`` (n, 6) in pixels (``targets_to_array``); ``anchors`` (levels, na, 2) in
    grid units; ``strides`` in pixels; ``shapes`` each level's (H, W)."""
    out = []
    for anc, s, shape in zip(anchors, strides, shapes):
        t = np.array(targets, dtype=np.float32)
        t[:, 2:6] /= s
        out.append(_level_matches(t, np.asarray(anc, dtype=np.float32), shape, anchor_t))
    return out


class YOLOLoss:
    """YOLOv5's loss for a ``YOLOv5`` model (reads its head's anchors and strides)."""

    def __init__(self, model, box=0.05, obj=1.0, cls=0.5, anchor_t=4.0, iou_kind="ciou",
                 balance=(4.0, 1.0, 0.4), label_smoothing=0.0):
        where = "YOLOLoss"
        for name, v in (("box", box), ("obj", obj), ("cls", cls)):
            check_number(where, name, v, low=0)
        self.anchor_t = check_number(where, "anchor_t", anchor_t, low=1, low_open=True)
        self.iou_kind = check_choice(where, "iou_kind", iou_kind, ("ciou", "giou", "iou"))
        smooth = check_number(where, "label_smoothing", label_smoothing, low=0, high=1)
        self.cp, self.cn = 1.0 - 0.5 * smooth, 0.5 * smooth
        self.gains, self.balance = (box, obj, cls), tuple(balance)
        self.detect = model.detect
        if len(self.balance) != self.detect.nl:
            raise ValueError(f"{where}: balance must hold one weight per level "
                             f"({self.detect.nl}), got {balance!r}")

    def __call__(self, raw, targets):
        """``raw``: the model's output (list of (N, na, H, W, no)); ``targets``: (n, 6)
        pixels (``targets_to_array``).  Returns ``(loss, {"box", "obj", "cls"})``."""
        det = self.detect
        shapes = [p.shape[2:4] for p in raw]
        matches = build_targets(cuda.as_numpy(targets), det.anchors, det.stride, shapes,
                                self.anchor_t)
        lbox = lobj = lcls = 0.0
        for p, match, weight in zip(raw, matches, self.balance):
            xp = cuda.get_array_module(p.data)
            tobj = np.zeros(p.shape[:4], dtype=p.dtype)
            if match is not None:
                (b, a, gj, gi), tbox, anc, tcls = match
                ps = p[b, a, gj, gi]                              # (m, no)
                pxy = F.sigmoid(ps[:, 0:2]) * 2 - 0.5
                pwh = (F.sigmoid(ps[:, 2:4]) * 2) ** 2 * xp.asarray(anc)
                iou = bbox_iou(F.concatenate([pxy, pwh], axis=1), xp.asarray(tbox),
                               self.iou_kind)
                lbox = lbox + (1.0 - iou).mean()
                # several matches may hit one cell: keep the last, as YOLOv5 does
                tobj[b, a, gj, gi] = np.clip(cuda.as_numpy(iou.data), 0, None)
                if det.nc > 1:
                    t = np.full((len(tcls), det.nc), self.cn, dtype=p.dtype)
                    t[np.arange(len(tcls)), tcls] = self.cp
                    lcls = lcls + F.binary_cross_entropy_with_logits(ps[:, 5:], xp.asarray(t))
            lobj = lobj + F.binary_cross_entropy_with_logits(p[..., 4], xp.asarray(tobj)) * weight
        parts = [part * gain for part, gain in zip((lbox, lobj, lcls), self.gains)]
        loss = (parts[0] + parts[1] + parts[2]) * raw[0].shape[0]   # lobj: always a Variable
        return loss, {k: v if isinstance(v, float) else v.item()
                      for k, v in zip(("box", "obj", "cls"), parts)}


def kmeans_anchors(wh, n=9, iters=100, seed=0):
    """``n`` anchors (w, h) fitted to box sizes ``wh`` (m, 2) by k-means with the
    ``1 - IoU`` distance of YOLOv2 (boxes compared as if sharing a centre), sorted by
    area and split into 3 levels of n/3: ready for ``YOLOv5(anchors=...)``."""
    wh = np.asarray(wh, dtype=np.float64)
    n = check_int("kmeans_anchors", "n", n, low=3)
    if n % 3 or len(wh) < n:
        raise ValueError(f"kmeans_anchors: n must be a multiple of 3 and at most the "
                         f"number of boxes ({len(wh)}), got {n}")
    rng = np.random.default_rng(seed)
    centres = wh[rng.choice(len(wh), n, replace=False)]
    for _ in range(iters):
        inter = np.minimum(wh[:, None], centres[None]).prod(axis=2)
        iou = inter / (wh.prod(axis=1)[:, None] + centres.prod(axis=1)[None] - inter)
        nearest = iou.argmax(axis=1)
        new = np.array([np.median(wh[nearest == k], axis=0) if (nearest == k).any()
                        else centres[k] for k in range(n)])
        if np.allclose(new, centres):
            break
        centres = new
    centres = centres[np.argsort(centres.prod(axis=1))]
    per = n // 3
    return tuple(tuple(float(round(v, 1)) for v in centres[i * per:(i + 1) * per].ravel())
                 for i in range(3))
