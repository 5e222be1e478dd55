"""Box utilities for detection: format conversions, pairwise IoU, non-maximum suppression
and the differentiable IoU family (IoU, GIoU, DIoU, CIoU) used by detector losses.

Boxes are ``(x1, y1, x2, y2)`` ("xyxy", torchvision's convention) unless a name says
``xywh`` (centre, width, height: what YOLO heads predict).  ``box_iou`` and ``nms`` work
on plain arrays (no graph); ``bbox_iou`` is built from LeZero operators, so gradients flow
through it into the predicted boxes.
"""
import math

import numpy as np

import lezero as lz
import lezero.functions as F
from lezero import cuda
from lezero.utils.checks import check_array, check_choice, check_number

__all__ = ["xywh_to_xyxy", "xyxy_to_xywh", "box_area", "box_iou", "nms", "batched_nms",
           "bbox_iou"]


def _boxes(where, name, boxes):
    b = check_array(where, name, boxes)
    if b.ndim != 2 or b.shape[1] != 4:
        raise ValueError(f"{where}: {name} must have shape (N, 4), got {tuple(b.shape)}")
    return b


def xywh_to_xyxy(b):
    """``(cx, cy, w, h)`` rows -> ``(x1, y1, x2, y2)`` rows (any leading shape)."""
    xp = cuda.get_array_module(b)
    half = b[..., 2:4] / 2
    return xp.concatenate([b[..., :2] - half, b[..., :2] + half], axis=-1)


def xyxy_to_xywh(b):
    """``(x1, y1, x2, y2)`` rows -> ``(cx, cy, w, h)`` rows (any leading shape)."""
    xp = cuda.get_array_module(b)
    return xp.concatenate([(b[..., :2] + b[..., 2:4]) / 2, b[..., 2:4] - b[..., :2]], axis=-1)


def box_area(b):
    """Areas of xyxy boxes (zero for inverted ones)."""
    xp = cuda.get_array_module(b)
    return xp.clip(b[..., 2] - b[..., 0], 0, None) * xp.clip(b[..., 3] - b[..., 1], 0, None)


def box_iou(boxes1, boxes2):
    """Pairwise IoU of xyxy boxes: (N, 4) and (M, 4) -> (N, M), as
    ``torchvision.ops.box_iou``.  Arrays in, array out (no gradient)."""
    a = _boxes("box_iou", "boxes1", boxes1)
    b = _boxes("box_iou", "boxes2", boxes2)
    xp = cuda.get_array_module(a)
    lt = xp.maximum(a[:, None, :2], b[None, :, :2])
    rb = xp.minimum(a[:, None, 2:], b[None, :, 2:])
    wh = xp.clip(rb - lt, 0, None)
    inter = wh[..., 0] * wh[..., 1]
    union = box_area(a)[:, None] + box_area(b)[None, :] - inter
    return inter / xp.where(union > 0, union, 1)


def nms(boxes, scores, iou_threshold):
    """Greedy non-maximum suppression, as ``torchvision.ops.nms``: the indices of the kept
    boxes, highest score first.  A box is dropped when its IoU with a kept, higher-scoring
    box is above ``iou_threshold``.  Runs on the host (NumPy)."""
    boxes = cuda.as_numpy(_boxes("nms", "boxes", boxes))
    scores = cuda.as_numpy(check_array("nms", "scores", scores))
    if scores.shape != (len(boxes),):
        raise ValueError(f"nms: scores must have shape ({len(boxes)},), got {scores.shape}")
    iou_threshold = check_number("nms", "iou_threshold", iou_threshold)
    order = np.argsort(-scores, kind="stable")
    keep = []
    while order.size:
        best, rest = order[0], order[1:]
        keep.append(best)
        if not rest.size:
            break
        # each round drops everything the best remaining box suppresses at once
        order = rest[box_iou(boxes[best:best + 1], boxes[rest])[0] <= iou_threshold]
    return np.asarray(keep, dtype=np.int64)


def batched_nms(boxes, scores, labels, iou_threshold):
    """NMS within each label separately (boxes of different classes never suppress each
    other), as ``torchvision.ops.batched_nms``: shift each class's boxes by an offset
    larger than any coordinate so they cannot overlap, then one ``nms``."""
    boxes = cuda.as_numpy(_boxes("batched_nms", "boxes", boxes))
    labels = cuda.as_numpy(check_array("batched_nms", "labels", labels))
    if len(boxes) == 0:
        return np.zeros(0, dtype=np.int64)
    offset = labels.astype(boxes.dtype)[:, None] * (np.abs(boxes).max() * 2 + 1)
    return nms(boxes + offset, scores, iou_threshold)


def bbox_iou(pred, target, kind="ciou", eps=1e-7):
    """Element-wise IoU of matching rows of two sets of ``xywh`` boxes, differentiable.

    ``kind``: ``"iou"``, ``"giou"`` (minus the empty share of the enclosing box),
    ``"diou"`` (minus the squared centre distance over the enclosing diagonal) or
    ``"ciou"`` (DIoU minus ``alpha * v``, v the aspect-ratio disagreement; ``alpha`` is
    held constant, as in Zheng et al. and torchvision).  ``pred`` is a Variable or array
    (N, 4), ``target`` an array or Variable (N, 4); returns a Variable (N,).  The loss is
    ``1 - bbox_iou``."""
    check_choice("bbox_iou", "kind", kind, ("iou", "giou", "diou", "ciou"))
    p = pred if isinstance(pred, lz.Variable) else lz.Variable(pred)
    t = target.data if isinstance(target, lz.Variable) else target
    for name, b in (("pred", p.data), ("target", t)):
        if b.ndim != 2 or b.shape[1] != 4:
            raise ValueError(f"bbox_iou: {name} must have shape (N, 4), got {b.shape}")
    px, py, pw, ph = (p[:, i] for i in range(4))
    tx, ty, tw, th = (t[:, i] for i in range(4))
    p1x, p1y, p2x, p2y = px - pw / 2, py - ph / 2, px + pw / 2, py + ph / 2
    t1x, t1y, t2x, t2y = tx - tw / 2, ty - th / 2, tx + tw / 2, ty + th / 2
    iw = F.clip(F.minimum(p2x, t2x) - F.maximum(p1x, t1x), 0.0, None)
    ih = F.clip(F.minimum(p2y, t2y) - F.maximum(p1y, t1y), 0.0, None)
    inter = iw * ih
    union = pw * ph + tw * th - inter + eps
    iou = inter / union
    if kind == "iou":
        return iou
    cw = F.maximum(p2x, t2x) - F.minimum(p1x, t1x)       # enclosing box
    ch = F.maximum(p2y, t2y) - F.minimum(p1y, t1y)
    if kind == "giou":
        c_area = cw * ch + eps
        return iou - (c_area - union) / c_area
    c2 = cw ** 2 + ch ** 2 + eps
    rho2 = (px - tx) ** 2 + (py - ty) ** 2
    if kind == "diou":
        return iou - rho2 / c2
    v = (4 / math.pi ** 2) * (F.arctan(tw / (th + eps)) - F.arctan(pw / (ph + eps))) ** 2
    with lz.no_grad():
        alpha = v.data / (v.data - iou.data + (1 + eps))
    return iou - (rho2 / c2 + v * alpha)
