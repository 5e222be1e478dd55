"""YOLOv5-n: a PyTorch twin written here (YOLOv5 v6.0's layers, by hand) loads LeZero's
keys as they are and gives the same head maps and gradients; the head's decoding, the
target assignment and the loss are checked against hand computations and torch."""
import numpy as np
import pytest
import torch

import lezero as lz
from lezero.nn.models import get_model, yolov5n
from lezero.nn.models.yolo import YOLOv5
from lezero.nn.models.yolo_loss import (YOLOLoss, build_targets, kmeans_anchors,
                                        targets_to_array)
from lezero.testing.oracles import import_torchvision

from tests.nn.models._helpers import assert_grads_close, randomize_batchnorm_, torch_state

tnn = torch.nn
ANCHORS = ((8, 8, 12, 10, 10, 14), (16, 16, 20, 14, 14, 22), (24, 24, 30, 20, 20, 30))


# ----- the twin -------------------------------------------------------------------------

class TConv(tnn.Module):
    def __init__(self, c1, c2, k=1, s=1, p=None):
        super().__init__()
        self.conv = tnn.Conv2d(c1, c2, k, s, k // 2 if p is None else p, bias=False)
        self.bn = tnn.BatchNorm2d(c2, eps=1e-3, momentum=0.03)

    def forward(self, x):
        return tnn.functional.silu(self.bn(self.conv(x)))


class TBottleneck(tnn.Module):
    def __init__(self, c, shortcut):
        super().__init__()
        self.cv1, self.cv2, self.add = TConv(c, c), TConv(c, c, 3), shortcut

    def forward(self, x):
        y = self.cv2(self.cv1(x))
        return x + y if self.add else y


class TC3(tnn.Module):
    def __init__(self, c1, c2, n, shortcut=True):
        super().__init__()
        c = c2 // 2
        self.cv1, self.cv2, self.cv3 = TConv(c1, c), TConv(c1, c), TConv(2 * c, c2)
        self.m = tnn.Sequential(*(TBottleneck(c, shortcut) for _ in range(n)))

    def forward(self, x):
        return self.cv3(torch.cat([self.m(self.cv1(x)), self.cv2(x)], 1))


class TSPPF(tnn.Module):
    def __init__(self, c1, c2):
        super().__init__()
        self.cv1, self.cv2 = TConv(c1, c1 // 2), TConv(c1 * 2, c2)
        self.m = tnn.MaxPool2d(5, 1, 2)

    def forward(self, x):
        x = self.cv1(x)
        y1 = self.m(x)
        y2 = self.m(y1)
        return self.cv2(torch.cat([x, y1, y2, self.m(y2)], 1))


class TDetect(tnn.Module):
    def __init__(self, nc, ch):
        super().__init__()
        self.no, self.na = nc + 5, 3
        self.register_buffer("anchors", torch.zeros(3, 3, 2))
        self.m = tnn.ModuleList(tnn.Conv2d(c, self.no * 3, 1) for c in ch)

    def forward(self, xs):
        out = []
        for conv, x in zip(self.m, xs):
            y = conv(x)
            n, _, h, w = y.shape
            out.append(y.view(n, 3, self.no, h, w).permute(0, 1, 3, 4, 2))
        return out


class TYOLOv5n(tnn.Module):
    """YOLOv5-n (width 0.25, depth 0.33) written out layer by layer."""

    def __init__(self, nc):
        super().__init__()
        up = tnn.Upsample(scale_factor=2, mode="nearest")
        self.model = tnn.Sequential(
            TConv(3, 16, 6, 2, 2), TConv(16, 32, 3, 2), TC3(32, 32, 1), TConv(32, 64, 3, 2),
            TC3(64, 64, 2), TConv(64, 128, 3, 2), TC3(128, 128, 3), TConv(128, 256, 3, 2),
            TC3(256, 256, 1), TSPPF(256, 256),
            TConv(256, 128), up, tnn.Identity(), TC3(256, 128, 1, False),
            TConv(128, 64), up, tnn.Identity(), TC3(128, 64, 1, False),
            TConv(64, 64, 3, 2), tnn.Identity(), TC3(128, 128, 1, False),
            TConv(128, 128, 3, 2), tnn.Identity(), TC3(256, 256, 1, False),
            TDetect(nc, (64, 128, 256)))

    def forward(self, x):
        m, keep = self.model, {}
        for i in range(10):
            x = keep[i] = m[i](x)
        p10 = m[10](x)
        p14 = m[14](m[13](torch.cat([m[11](p10), keep[6]], 1)))
        p17 = m[17](torch.cat([m[15](p14), keep[4]], 1))
        p20 = m[20](torch.cat([m[18](p17), p14], 1))
        p23 = m[23](torch.cat([m[21](p20), p10], 1))
        return m[24]([p17, p20, p23])


@pytest.fixture(scope="module")
def twins():
    torch.manual_seed(0)
    ref = TYOLOv5n(nc=3)
    randomize_batchnorm_(ref)
    model = yolov5n(num_classes=3, anchors=ANCHORS, image_size=64)
    state = torch_state(ref)
    state["model.24.anchors"] = model.state_dict()["model.24.anchors"]
    model.load_state_dict(state, strict=True)
    return model, ref


def test_layout_matches_the_twin_and_yolov5n_size(twins):
    model, ref = twins
    assert list(model.state_dict()) == list(ref.state_dict())
    assert all(model.state_dict()[k].shape == tuple(v.shape)
               for k, v in ref.state_dict().items())
    # YOLOv5-n with 80 classes, as Ultralytics prints it: 1,872,157 parameters
    assert yolov5n().num_parameters() == 1872157
    assert get_model("yolov5s", num_classes=3).num_parameters() > 3 * model.num_parameters()
    assert np.allclose(model.detect.anchors[0] * 8, np.reshape(ANCHORS[0], (3, 2)))


@pytest.mark.parametrize("train", [False, True])
def test_forward_and_gradient_match_the_twin(twins, train):
    model, ref = twins
    model.train(train)
    ref.train(train)
    x = np.random.default_rng(1).random((2, 3, 64, 64), dtype=np.float32)
    weights = [np.random.default_rng(i).standard_normal((2, 3, s, s, 8)).astype(np.float32)
               for i, s in enumerate((8, 4, 2))]
    out = model(x)
    tout = ref(torch.from_numpy(x))
    for o, t in zip(out, tout):
        np.testing.assert_allclose(o.data, t.detach().numpy(), rtol=1e-3, atol=2e-4)
    if not train:
        return
    model.zero_grad()
    sum((o * w).sum() for o, w in zip(out, weights)).backward()
    sum((t * torch.from_numpy(w)).sum() for t, w in zip(tout, weights)).backward()
    assert_grads_close(model, ref, ("model.0.conv.weight", "model.13.cv3.conv.weight",
                                    "model.24.m.1.bias"), rtol=2e-3, rel_atol=2e-3)


def test_decode_puts_zero_logits_at_cell_centres_with_anchor_sizes():
    model = yolov5n(num_classes=2, anchors=ANCHORS)
    raw = [np.zeros((1, 3, s, s, 7), np.float32) for s in (8, 4, 2)]
    pred = model.decode(raw)
    assert pred.shape == (1, 3 * (64 + 16 + 4), 7)
    # P3, anchor 1, cell (row 2, column 5): centre ((5 + 0.5) * 8, (2 + 0.5) * 8)
    row = pred[0, 64 + 2 * 8 + 5]
    np.testing.assert_allclose(row, [44, 20, 12, 10, 0.5, 0.5, 0.5], rtol=1e-6)


def test_build_targets_assigns_the_centre_cell_and_the_two_nearest_neighbours():
    # one 10x10 box centred at (12.3, 20.7) px; at stride 8 the centre is (1.5375, 2.5875)
    # in cell (gi, gj) = (1, 2), nearer its right and bottom edges -> also (2, 2), (1, 3)
    targets = targets_to_array([np.array([[7.3, 15.7, 17.3, 25.7]], np.float32)], [[1]])
    anchors = np.array([[[1.0, 1.0], [1.25, 1.25], [5.0, 5.0]]], np.float32)  # grid units
    (idx, tbox, anc, cls), = build_targets(targets, anchors, [8], [(8, 8)])
    b, a, gj, gi = idx
    # anchor 2 (40 px for a 10 px box) is beyond the 4x ratio limit
    assert sorted(zip(a.tolist(), gi.tolist(), gj.tolist())) == [
        (0, 1, 2), (0, 1, 3), (0, 2, 2), (1, 1, 2), (1, 1, 3), (1, 2, 2)]
    assert set(b.tolist()) == {0} and set(cls.tolist()) == {1}
    right = (gi == 2) & (a == 0)
    np.testing.assert_allclose(tbox[right][0], [1.5375 - 2, 0.5875, 1.25, 1.25], rtol=1e-5)


def test_loss_matches_a_torch_computation_of_the_same_formula():
    ops = import_torchvision().ops
    model = yolov5n(num_classes=3, anchors=ANCHORS, image_size=64)
    loss_fn = YOLOLoss(model)
    rng = np.random.default_rng(0)
    raw = [lz.Variable(rng.standard_normal((2, 3, s, s, 8)).astype(np.float32) * 0.5)
           for s in (8, 4, 2)]
    boxes = [np.array([[4, 4, 20, 16], [30, 30, 50, 58]], np.float32),
             np.array([[10, 40, 22, 52]], np.float32)]
    targets = targets_to_array(boxes, [np.array([0, 2]), np.array([1])])
    loss, parts = loss_fn(raw, targets)
    loss.backward()

    traw = [torch.tensor(r.data, requires_grad=True) for r in raw]
    matches = build_targets(targets, model.detect.anchors, model.detect.stride,
                            [r.shape[2:4] for r in raw])
    lbox = lobj = lcls = 0
    bce = tnn.functional.binary_cross_entropy_with_logits
    for p, match, balance in zip(traw, matches, (4.0, 1.0, 0.4)):
        tobj = torch.zeros(p.shape[:4])
        (b, a, gj, gi), tbox, anc, tcls = match
        ps = p[b, a, gj, gi]
        pbox = torch.cat([ps[:, :2].sigmoid() * 2 - 0.5,
                          (ps[:, 2:4].sigmoid() * 2) ** 2 * torch.from_numpy(anc)], 1)
        to_xyxy = lambda t: torch.cat([t[:, :2] - t[:, 2:] / 2, t[:, :2] + t[:, 2:] / 2], 1)
        iou = 1 - ops.complete_box_iou_loss(to_xyxy(pbox), to_xyxy(torch.from_numpy(tbox)))
        lbox = lbox + (1 - iou).mean()
        tobj[b, a, gj, gi] = iou.detach().clamp(0)
        lcls = lcls + bce(ps[:, 5:], tnn.functional.one_hot(torch.from_numpy(tcls), 3).float())
        lobj = lobj + bce(p[..., 4], tobj) * balance
    want = (0.05 * lbox + 1.0 * lobj + 0.5 * lcls) * 2
    want.backward()
    assert loss.item() == pytest.approx(want.item(), rel=1e-4)
    assert parts["box"] == pytest.approx(0.05 * lbox.item(), rel=1e-4)
    for r, t in zip(raw, traw):
        np.testing.assert_allclose(r.grad.data, t.grad.numpy(), rtol=1e-3, atol=1e-6)


def test_kmeans_anchors_finds_three_clear_sizes():
    rng = np.random.default_rng(0)
    wh = np.concatenate([rng.normal(s, 0.3, (40, 2)) for s in (4, 4, 4, 10, 10, 10,
                                                                30, 30, 30)])
    anchors = kmeans_anchors(wh, n=3)
    assert [round(a[0]) for a in anchors] == [4, 10, 30]
    with pytest.raises(ValueError, match="kmeans_anchors: n must be a multiple of 3"):
        kmeans_anchors(wh, n=4)


def test_predict_returns_boxes_scores_labels_and_bad_arguments_are_named():
    model = yolov5n(num_classes=3, anchors=ANCHORS, image_size=64)
    (boxes, scores, labels), = model.predict(np.zeros((1, 3, 64, 64), np.float32),
                                             conf_thres=0.0)
    assert boxes.shape[1] == 4 and len(boxes) == len(scores) == len(labels) <= 100
    assert np.all(scores[:-1] >= scores[1:])
    with pytest.raises(TypeError, match="YOLOv5: num_classes must be an int"):
        YOLOv5("3")
    with pytest.raises(ValueError, match="YOLOv5: anchors must be 3 levels"):
        YOLOv5(3, anchors=((1, 2),))
    with pytest.raises(ValueError, match=r"YOLOLoss: balance must hold one weight per level"):
        YOLOLoss(model, balance=(1.0,))
    with pytest.raises(ValueError, match="YOLOLoss: iou_kind must be one of"):
        YOLOLoss(model, iou_kind="eiou")
