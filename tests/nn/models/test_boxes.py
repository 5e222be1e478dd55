"""Box utilities: IoU against torchvision, NMS against a brute-force reference, the IoU
losses' values and gradients against torchvision's, and mAP@0.5 on a hand-computed case."""
import numpy as np
import pytest
import torch

import lezero as lz
from lezero.nn.models.boxes import (batched_nms, bbox_iou, box_iou, nms, xywh_to_xyxy,
                                    xyxy_to_xywh)
from lezero.nn.models.detection_metrics import average_precision, mean_average_precision
from lezero.testing.oracles import import_torchvision


def random_boxes(n, seed=0, size=50.0):
    rng = np.random.default_rng(seed)
    xy = rng.uniform(0, size, (n, 2))
    wh = rng.uniform(2, size / 2, (n, 2))
    return np.concatenate([xy, xy + wh], axis=1).astype(np.float32)


def brute_force_nms(boxes, scores, threshold):
    """The definition, one pair at a time: walk boxes by falling score; keep one unless
    a box kept before it overlaps it by more than the threshold."""
    def iou(a, b):
        iw = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
        ih = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
        inter = iw * ih
        union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
        return inter / union
    keep = []
    for i in sorted(range(len(boxes)), key=lambda k: -scores[k]):
        if all(iou(boxes[i], boxes[j]) <= threshold for j in keep):
            keep.append(i)
    return keep


def test_formats_round_trip_and_box_iou_matches_torchvision():
    ops = import_torchvision().ops
    a, b = random_boxes(7, 1), random_boxes(5, 2)
    np.testing.assert_allclose(xywh_to_xyxy(xyxy_to_xywh(a)), a, rtol=1e-6, atol=1e-5)
    want = ops.box_iou(torch.from_numpy(a), torch.from_numpy(b)).numpy()
    np.testing.assert_allclose(box_iou(a, b), want, rtol=1e-5, atol=1e-7)
    assert box_iou(a, a).diagonal() == pytest.approx(np.ones(7))


@pytest.mark.parametrize("threshold", [0.1, 0.3, 0.5, 0.7])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_nms_equals_brute_force(threshold, seed):
    boxes = random_boxes(60, seed, size=30.0)          # crowded: many overlaps
    scores = np.random.default_rng(seed + 10).permutation(60).astype(np.float32)
    got = nms(boxes, scores, threshold)
    assert got.tolist() == brute_force_nms(boxes, scores, threshold)
    assert 0 < len(got) < 60


def test_batched_nms_never_suppresses_across_classes():
    boxes = np.array([[0, 0, 10, 10], [1, 1, 10, 10], [0, 0, 10, 10]], np.float32)
    scores = np.array([0.9, 0.8, 0.7], np.float32)
    assert batched_nms(boxes, scores, np.array([0, 0, 1]), 0.5).tolist() == [0, 2]
    assert batched_nms(boxes, scores, np.array([0, 0, 0]), 0.5).tolist() == [0]
    assert batched_nms(np.zeros((0, 4), np.float32), np.zeros(0, np.float32),
                       np.zeros(0), 0.5).tolist() == []


def test_nms_rejects_bad_input():
    with pytest.raises(ValueError, match=r"nms: boxes must have shape \(N, 4\)"):
        nms(np.zeros((3, 5), np.float32), np.zeros(3, np.float32), 0.5)
    with pytest.raises(ValueError, match="nms: scores must have shape"):
        nms(np.zeros((3, 4), np.float32), np.zeros(2, np.float32), 0.5)
    with pytest.raises(TypeError, match="nms: boxes must be a Variable or an ndarray"):
        nms([[0, 0, 1, 1]], np.zeros(1, np.float32), 0.5)


@pytest.mark.parametrize("kind,loss_name", [("giou", "generalized_box_iou_loss"),
                                            ("diou", "distance_box_iou_loss"),
                                            ("ciou", "complete_box_iou_loss")])
def test_iou_losses_match_torchvision_with_gradients(kind, loss_name):
    ops = import_torchvision().ops
    rng = np.random.default_rng(3)
    pred = np.concatenate([rng.uniform(5, 15, (8, 2)), rng.uniform(2, 9, (8, 2))], 1)
    target = np.concatenate([rng.uniform(5, 15, (8, 2)), rng.uniform(2, 9, (8, 2))], 1)
    pred, target = pred.astype(np.float32), target.astype(np.float32)
    p = lz.Variable(pred)
    loss = 1 - bbox_iou(p, target, kind)
    loss.sum().backward()
    tp = torch.tensor(xywh_to_xyxy(pred), requires_grad=True)
    tl = getattr(ops, loss_name)(tp, torch.from_numpy(xywh_to_xyxy(target)))
    tl.sum().backward()
    np.testing.assert_allclose(loss.data, tl.detach().numpy(), rtol=1e-4, atol=1e-5)
    # torch's gradient is with respect to (x1, y1, x2, y2); map ours from (cx, cy, w, h)
    g = tp.grad.numpy()
    want = np.concatenate([g[:, :2] + g[:, 2:], (g[:, 2:] - g[:, :2]) / 2], axis=1)
    np.testing.assert_allclose(p.grad.data, want, rtol=1e-3, atol=1e-5)


def test_bbox_iou_plain_iou_and_errors():
    same = np.array([[5, 5, 4, 2]], np.float32)
    assert bbox_iou(same, same, "iou").data == pytest.approx([1.0], abs=1e-6)
    half = np.array([[7, 5, 4, 2]], np.float32)          # shifted by half the width
    assert bbox_iou(half, same, "iou").data == pytest.approx([1 / 3], abs=1e-6)
    with pytest.raises(ValueError, match="bbox_iou: kind must be one of"):
        bbox_iou(same, same, "eiou")
    with pytest.raises(ValueError, match=r"bbox_iou: pred must have shape \(N, 4\)"):
        bbox_iou(np.zeros((2, 3), np.float32), same)


def test_average_precision_of_simple_curves():
    assert average_precision([1.0], [1.0]) == pytest.approx(1.0)
    assert average_precision([], []) == 0.0
    # recall 0.5 at precision 1, then recall 1 at precision 0.5: area 0.5 + 0.25
    assert average_precision([0.5, 0.5, 1.0], [1.0, 0.5, 0.5]) == pytest.approx(0.75)
    # a false positive first, then two hits: precision 0, 1/2, 2/3 -- the envelope lifts
    # the whole curve to 2/3 (without it the area would be 0.25 + 1/3)
    assert average_precision([0.0, 0.5, 1.0], [0.0, 0.5, 2 / 3]) == pytest.approx(2 / 3)


def test_mean_average_precision_hand_computed():
    """Class 0: three ground-truth boxes, four detections; by falling score they are TP
    (exact), FP (a duplicate of the same box), FP (no overlap), TP (IoU 0.6), so
    precision/recall run (1, 1/3), (1/2, 1/3), (1/3, 1/3), (1/2, 2/3) and AP = 1/3 * 1 +
    1/3 * 1/2 = 0.5.  Class 1: one box, never detected: AP 0.  Class 2: no ground truth:
    left out.  mAP = 0.25; a box at IoU 0.4 would not count at the 0.5 threshold."""
    a, b, c = [0, 0, 10, 10], [20, 20, 30, 30], [40, 0, 50, 10]
    detections = [
        (np.array([a, a, [20, 20, 30, 26]], np.float32), np.array([0.9, 0.8, 0.6]),
         np.array([0, 0, 0])),
        (np.array([[0, 30, 5, 35], [0, 0, 10, 10]], np.float32), np.array([0.7, 0.95]),
         np.array([0, 2])),
    ]
    ground_truths = [(np.array([a, b], np.float32), np.array([0, 0])),
                     (np.array([[30, 30, 40, 40], c], np.float32), np.array([0, 1]))]
    value, per_class = mean_average_precision(detections, ground_truths, num_classes=3)
    assert per_class[0] == pytest.approx(0.5)
    assert per_class[1] == 0.0 and per_class[2] is None
    assert value == pytest.approx(0.25)
    value_strict, per_class_strict = mean_average_precision(detections, ground_truths, 3,
                                                            iou_threshold=0.65)
    # at 0.65 the IoU-0.6 box is a miss too: one TP first, then three FP -> AP 1/3
    assert per_class_strict[0] == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="2 detection entries but 1 ground-truth"):
        mean_average_precision(detections, ground_truths[:1], 3)
