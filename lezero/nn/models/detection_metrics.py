"""Mean average precision for detection (Pascal VOC / COCO's mAP@0.5 rule).

For each class, all detections over all images are sorted by score; one by one, a
detection is a true positive when its IoU with a not-yet-matched ground-truth box of its
image and class is at least ``iou_threshold`` (the best-overlapping such box is taken),
else a false positive.  Precision and recall along that list give the precision-recall
curve; its precision is made monotone (each point takes the best precision at any higher
recall) and AP is the exact area under it (VOC 2010+'s all-point interpolation, not the
11-point or COCO's 101-point sampling).  mAP is the mean AP over classes that have at
least one ground-truth box.
"""
import numpy as np

from lezero import cuda
from lezero.nn.models.boxes import box_iou
from lezero.utils.checks import check_number

__all__ = ["average_precision", "mean_average_precision"]


def average_precision(recall, precision):
    """Area under a precision-recall curve (points in detection order), all-point
    interpolated: the curve is closed at recall 0 and 1 and its precision made monotone."""
    r = np.concatenate([[0.0], np.asarray(recall, dtype=np.float64), [1.0]])
    p = np.concatenate([[1.0], np.asarray(precision, dtype=np.float64), [0.0]])
    p = np.maximum.accumulate(p[::-1])[::-1]       # the envelope: best precision to the right
    steps = np.nonzero(r[1:] != r[:-1])[0]
    return float(np.sum((r[steps + 1] - r[steps]) * p[steps + 1]))


def _match_image(boxes, scores, gt_boxes, iou_threshold):
    """TP flags for one image's detections of one class, taken in score order."""
    order = np.argsort(-scores, kind="stable")
    tp = np.zeros(len(boxes), dtype=bool)
    if not len(gt_boxes) or not len(boxes):
        return tp
    iou = box_iou(boxes[order], gt_boxes)
    taken = np.zeros(len(gt_boxes), dtype=bool)
    for rank, det in enumerate(order):
        candidates = np.where(taken, -1.0, iou[rank])
        best = int(candidates.argmax())
        if candidates[best] >= iou_threshold:
            taken[best] = True
            tp[det] = True
    return tp


def mean_average_precision(detections, ground_truths, num_classes, iou_threshold=0.5):
    """mAP over images.  ``detections[i] = (boxes (k, 4) xyxy, scores (k,), labels (k,))``
    for image ``i``, ``ground_truths[i] = (boxes (g, 4), labels (g,))``.

    Returns ``(mAP, per_class)``: ``per_class`` is a list with each class's AP, or None
    for a class without ground truth (left out of the mean)."""
    iou_threshold = check_number("mean_average_precision", "iou_threshold", iou_threshold,
                                 low=0, high=1)
    if len(detections) != len(ground_truths):
        raise ValueError(f"mean_average_precision: {len(detections)} detection entries but "
                         f"{len(ground_truths)} ground-truth entries (one per image each)")
    per_class = []
    for c in range(num_classes):
        scores, hits, n_gt = [], [], 0
        for (boxes, s, labels), (gt_boxes, gt_labels) in zip(detections, ground_truths):
            boxes, s, labels = (np.asarray(cuda.as_numpy(a)) for a in (boxes, s, labels))
            gt_boxes = np.asarray(cuda.as_numpy(gt_boxes)).reshape(-1, 4)
            gt = gt_boxes[np.asarray(cuda.as_numpy(gt_labels)) == c]
            mine = labels == c
            n_gt += len(gt)
            scores.append(s[mine])
            hits.append(_match_image(boxes[mine].reshape(-1, 4), s[mine], gt, iou_threshold))
        if n_gt == 0:
            per_class.append(None)
            continue
        scores, hits = np.concatenate(scores), np.concatenate(hits)
        order = np.argsort(-scores, kind="stable")
        tp = np.cumsum(hits[order])
        fp = np.cumsum(~hits[order])
        per_class.append(average_precision(tp / n_gt, tp / np.maximum(tp + fp, 1)))
    valid = [ap for ap in per_class if ap is not None]
    return (float(np.mean(valid)) if valid else 0.0), per_class
