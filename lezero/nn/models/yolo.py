"""A YOLOv5-style one-stage detector (Jocher et al., Ultralytics YOLOv5 v6.0 layout).

The network is YOLOv5's: a CSP backbone of ``C3`` blocks ending in ``SPPF``, a PAN neck
(top-down then bottom-up paths joined by ``Concat``) and an anchor-based ``Detect`` head
with three outputs at strides 8, 16 and 32.  Every convolution is a Conv-BN-SiLU block,
which is what makes the model easy to fuse and quantize (the smart-camera INT8 detector
builds on it).  The layers sit in ``model.0`` .. ``model.24`` with Ultralytics' submodule
names (``conv``/``bn``, ``cv1``/``cv2``/``cv3``/``m``, ``m.{i}`` for the head), so the
keys of a YOLOv5 ``state_dict`` (``model.24.anchors`` included) are the keys here.

``forward`` returns the raw head maps, one (N, anchors, H, W, 5 + classes) array per
level: what the loss (``YOLOLoss``) wants and what an exported or quantized graph should
end with.  ``decode`` turns them into boxes; ``predict`` decodes and applies NMS.
"""
import math

import numpy as np

import lezero as lz
import lezero.functions as F
from lezero import cuda, nn
from lezero.nn.models.boxes import batched_nms, xywh_to_xyxy
from lezero.nn.models.registry import register_model
from lezero.utils.checks import check_int, check_number, check_type

__all__ = ["Conv", "Bottleneck", "C3", "SPPF", "Concat", "Detect", "YOLOv5", "yolov5n",
           "yolov5s", "ANCHORS"]

# YOLOv5's anchors in pixels for 640x640 images: (w, h) pairs for P3/8, P4/16, P5/32.
ANCHORS = ((10, 13, 16, 30, 33, 23), (30, 61, 62, 45, 59, 119), (116, 90, 156, 198, 373, 326))


def make_divisible(x, divisor=8):
    """Channels rounded up to a multiple of ``divisor`` (YOLOv5's width scaling)."""
    return int(math.ceil(x / divisor) * divisor)


class Conv(nn.Module):
    """Convolution (``same`` padding, no bias), batch norm and SiLU."""

    def __init__(self, c1, c2, k=1, s=1, p=None, g=1, act=True):
        super().__init__()
        self.conv = nn.Conv2d(c1, c2, k, s, k // 2 if p is None else p, groups=g, bias=False)
        self.bn = nn.BatchNorm2d(c2, eps=1e-3, momentum=0.03)
        self.act = act

    def forward(self, x):
        y = self.bn(self.conv(x))
        return F.silu(y) if self.act else y


class Bottleneck(nn.Module):
    """1x1 then 3x3 Conv, with the input added back when ``shortcut`` and widths match."""

    def __init__(self, c1, c2, shortcut=True, g=1, e=0.5):
        super().__init__()
        c_ = int(c2 * e)
        self.cv1 = Conv(c1, c_, 1, 1)
        self.cv2 = Conv(c_, c2, 3, 1, g=g)
        self.add = shortcut and c1 == c2

    def forward(self, x):
        y = self.cv2(self.cv1(x))
        return x + y if self.add else y


class C3(nn.Module):
    """CSP bottleneck with three convolutions: one half of the channels goes through ``n``
    bottlenecks, the other half around them, and ``cv3`` mixes the two."""

    def __init__(self, c1, c2, n=1, shortcut=True, g=1, e=0.5):
        super().__init__()
        c_ = int(c2 * e)
        self.cv1 = Conv(c1, c_, 1, 1)
        self.cv2 = Conv(c1, c_, 1, 1)
        self.cv3 = Conv(2 * c_, c2, 1)
        self.m = nn.Sequential(*(Bottleneck(c_, c_, shortcut, g, e=1.0) for _ in range(n)))

    def forward(self, x):
        return self.cv3(F.concatenate([self.m(self.cv1(x)), self.cv2(x)], axis=1))


class SPPF(nn.Module):
    """Spatial pyramid pooling, fast: three chained k x k max pools (stride 1) of the same
    map, concatenated with it (equal to SPP's 5/9/13 pools for k=5)."""

    def __init__(self, c1, c2, k=5):
        super().__init__()
        c_ = c1 // 2
        self.cv1 = Conv(c1, c_, 1, 1)
        self.cv2 = Conv(c_ * 4, c2, 1, 1)
        self.k = k

    def forward(self, x):
        x = self.cv1(x)
        ys = [x]
        for _ in range(3):
            ys.append(F.max_pool2d(ys[-1], self.k, 1, self.k // 2))
        return self.cv2(F.concatenate(ys, axis=1))


class Concat(nn.Module):
    """Concatenate a list of maps along channels."""

    def forward(self, xs):
        return F.concatenate(list(xs), axis=1)


class Upsample(nn.Module):
    """Nearest-neighbour upsampling by 2 (``nn.Upsample(None, 2, 'nearest')`` in YOLOv5)."""

    def forward(self, x):
        return F.interpolate(x, scale_factor=2, mode="nearest")


class Detect(nn.Module):
    """The head: a 1x1 convolution per level predicting, for each of ``na`` anchors and
    each cell, ``(tx, ty, tw, th, objectness, class logits...)``.

    ``anchors`` (buffer, (levels, na, 2)) are in units of each level's stride, as
    YOLOv5 stores them; ``stride`` holds the strides in pixels."""

    def __init__(self, num_classes, anchors, ch, stride=(8, 16, 32)):
        super().__init__()
        self.nc, self.no = num_classes, num_classes + 5
        self.nl, self.na = len(anchors), len(anchors[0]) // 2
        self.stride = np.asarray(stride, dtype=np.float32)
        grid_anchors = np.asarray(anchors, dtype=np.float32).reshape(self.nl, self.na, 2)
        self.register_buffer("anchors", grid_anchors / self.stride[:, None, None])
        self.m = nn.ModuleList([nn.Conv2d(c, self.no * self.na, 1) for c in ch])

    def forward(self, xs):
        out = []
        for i, x in enumerate(xs):
            y = self.m[i](x)
            n, _, h, w = y.shape
            out.append(y.reshape(n, self.na, self.no, h, w).transpose(0, 1, 3, 4, 2))
        return out

    def init_biases(self, image_size=640):
        """YOLOv5's prior: objectness as if about 8 objects per 640x640 image, classes
        equally likely (keeps the first steps from drowning in false positives)."""
        for conv, s in zip(self.m, self.stride):
            b = conv.bias.data.reshape(self.na, self.no)
            b[:, 4] += math.log(8 / (image_size / s) ** 2)
            b[:, 5:] += math.log(0.6 / (self.nc - 0.99)) if self.nc > 1 else 0.0
            conv.bias.data = b.reshape(-1)

    def decode(self, raw):
        """Raw maps -> (N, boxes, 5 + classes): ``(cx, cy, w, h)`` in pixels, objectness
        and class probabilities (YOLOv5's inference output).  No graph is recorded."""
        outs = []
        for i, p in enumerate(raw):
            p = p.data if isinstance(p, lz.Variable) else p
            xp = cuda.get_array_module(p)
            n, na, h, w, no = p.shape
            y = 1 / (1 + xp.exp(-p))
            gy, gx = xp.meshgrid(xp.arange(h, dtype=p.dtype), xp.arange(w, dtype=p.dtype),
                                 indexing="ij")
            grid = xp.stack([gx, gy], axis=-1)[None, None]
            anchor = xp.asarray(self.anchors[i] * self.stride[i]).reshape(1, na, 1, 1, 2)
            xy = (y[..., :2] * 2 - 0.5 + grid) * self.stride[i]
            wh = (y[..., 2:4] * 2) ** 2 * anchor
            outs.append(xp.concatenate([xy, wh, y[..., 4:]], axis=-1).reshape(n, -1, no))
        return xp.concatenate(outs, axis=1)


# YOLOv5 v6.0's yaml: (from, repeats, module, args); channels before width scaling.
_BACKBONE = [(-1, 1, "Conv", (64, 6, 2, 2)), (-1, 1, "Conv", (128, 3, 2)), (-1, 3, "C3", (128,)),
             (-1, 1, "Conv", (256, 3, 2)), (-1, 6, "C3", (256,)), (-1, 1, "Conv", (512, 3, 2)),
             (-1, 9, "C3", (512,)), (-1, 1, "Conv", (1024, 3, 2)), (-1, 3, "C3", (1024,)),
             (-1, 1, "SPPF", (1024, 5))]
_HEAD = [(-1, 1, "Conv", (512, 1, 1)), (-1, 1, "Upsample", ()), ((-1, 6), 1, "Concat", ()),
         (-1, 3, "C3", (512, False)), (-1, 1, "Conv", (256, 1, 1)), (-1, 1, "Upsample", ()),
         ((-1, 4), 1, "Concat", ()), (-1, 3, "C3", (256, False)), (-1, 1, "Conv", (256, 3, 2)),
         ((-1, 14), 1, "Concat", ()), (-1, 3, "C3", (512, False)), (-1, 1, "Conv", (512, 3, 2)),
         ((-1, 10), 1, "Concat", ()), (-1, 3, "C3", (1024, False)),
         ((17, 20, 23), 1, "Detect", ())]


def _build_layers(in_channels, num_classes, anchors, depth_multiple, width_multiple):
    """The 25 layers and where each takes its input from (YOLOv5's ``parse_model``)."""
    layers, sources, ch = [], [], [in_channels]
    for f, n, kind, args in _BACKBONE + _HEAD:
        n = max(round(n * depth_multiple), 1) if n > 1 else n
        if kind in ("Conv", "C3", "SPPF"):
            c1, c2 = ch[f], make_divisible(args[0] * width_multiple)
            if kind == "Conv":
                layer = Conv(c1, c2, *args[1:])
            elif kind == "C3":
                layer = C3(c1, c2, n, *args[1:])
            else:
                layer = SPPF(c1, c2, *args[1:])
        elif kind == "Upsample":
            layer, c2 = Upsample(), ch[f]
        elif kind == "Concat":
            layer, c2 = Concat(), sum(ch[x] for x in f)
        else:
            layer, c2 = Detect(num_classes, anchors, [ch[x] for x in f]), None
        layers.append(layer)
        sources.append(f)
        ch = ch + [c2] if len(layers) > 1 else [c2]
    return layers, sources


class YOLOv5(nn.Module):
    """YOLOv5 with ``depth_multiple`` (block repeats) and ``width_multiple`` (channels):
    (0.33, 0.25) is YOLOv5-n, (0.33, 0.5) YOLOv5-s.  ``anchors``: three tuples of (w, h)
    pixel pairs, one per level (YOLOv5's for 640x640 images by default; small images want
    small anchors, see ``yolo_loss.kmeans_anchors``).  ``image_size`` only sets the
    objectness prior of the head's biases."""

    def __init__(self, num_classes=80, in_channels=3, depth_multiple=0.33,
                 width_multiple=0.25, anchors=ANCHORS, image_size=640):
        super().__init__()
        where = "YOLOv5"
        check_int(where, "num_classes", num_classes, low=1)
        check_int(where, "in_channels", in_channels, low=1)
        check_number(where, "depth_multiple", depth_multiple, low=0, low_open=True)
        check_number(where, "width_multiple", width_multiple, low=0, low_open=True)
        check_type(where, "anchors", anchors, (tuple, list, np.ndarray))
        if len(anchors) != 3 or len({len(a) for a in anchors}) != 1 or len(anchors[0]) % 2:
            raise ValueError(f"{where}: anchors must be 3 levels of equally many (w, h) "
                             f"pairs, got {anchors!r}")
        layers, self.sources = _build_layers(in_channels, num_classes, anchors,
                                             depth_multiple, width_multiple)
        self.model = nn.Sequential(*layers)
        self.num_classes = num_classes
        self.detect.init_biases(image_size)     # PyTorch's default init elsewhere, as YOLOv5

    @property
    def detect(self):
        return self.model[len(self.model) - 1]

    def forward(self, x):
        saved = []
        for layer, f in zip(self.model, self.sources):
            if f != -1:
                x = [x if j == -1 else saved[j] for j in f] if isinstance(f, tuple) else saved[f]
            x = layer(x)
            saved.append(x)
        return x

    def decode(self, raw):
        """See ``Detect.decode``."""
        return self.detect.decode(raw)

    def predict(self, x, conf_thres=0.25, iou_thres=0.45, max_det=100):
        """Detections per image (eval mode, no graph): a list of ``(boxes (k, 4) xyxy
        pixels, scores (k,), labels (k,))``; score = objectness x class probability."""
        was_training = self.training
        self.eval()
        with lz.no_grad():
            pred = cuda.as_numpy(self.decode(self(x)))
        self.train(was_training)
        return [postprocess(p, conf_thres, iou_thres, max_det) for p in pred]


def postprocess(pred, conf_thres=0.25, iou_thres=0.45, max_det=100):
    """One image's decoded rows (boxes, 5 + classes) -> ``(boxes, scores, labels)`` after
    the confidence threshold and per-class NMS (the best class of each box only)."""
    scores_all = pred[:, 5:] * pred[:, 4:5]
    labels = scores_all.argmax(axis=1)
    scores = scores_all[np.arange(len(pred)), labels]
    keep = scores > conf_thres
    boxes, scores, labels = xywh_to_xyxy(pred[keep, :4]), scores[keep], labels[keep]
    kept = batched_nms(boxes, scores, labels, iou_thres)[:max_det]
    return boxes[kept], scores[kept], labels[kept]


@register_model()
def yolov5n(num_classes=80, **kwargs):
    """YOLOv5-n: depth 0.33, width 0.25 (about 1.9M parameters for 80 classes)."""
    return YOLOv5(num_classes, depth_multiple=0.33, width_multiple=0.25, **kwargs)


@register_model()
def yolov5s(num_classes=80, **kwargs):
    """YOLOv5-s: depth 0.33, width 0.5 (about 7.2M parameters for 80 classes)."""
    return YOLOv5(num_classes, depth_multiple=0.33, width_multiple=0.5, **kwargs)
