"""U-Net: a PyTorch twin (milesial/Pytorch-UNet's layers, written here) loads LeZero's keys
as they are and agrees on outputs and gradients; the IoU metric on a hand-computed case."""
import numpy as np
import pytest
import torch

from lezero.nn.models import UNet, get_model
from lezero.nn.models.unet import iou_per_class, mean_iou

from tests.nn.models._helpers import assert_grads_close, randomize_batchnorm_, torch_state

tnn = torch.nn


class TDoubleConv(tnn.Module):
    def __init__(self, cin, cout, mid=None):
        super().__init__()
        mid = mid or cout
        self.double_conv = tnn.Sequential(
            tnn.Conv2d(cin, mid, 3, padding=1, bias=False), tnn.BatchNorm2d(mid), tnn.ReLU(),
            tnn.Conv2d(mid, cout, 3, padding=1, bias=False), tnn.BatchNorm2d(cout), tnn.ReLU())

    def forward(self, x):
        return self.double_conv(x)


class TDown(tnn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.maxpool_conv = tnn.Sequential(tnn.MaxPool2d(2), TDoubleConv(cin, cout))

    def forward(self, x):
        return self.maxpool_conv(x)


class TUp(tnn.Module):
    def __init__(self, cin, cout, bilinear):
        super().__init__()
        if bilinear:
            self.up = tnn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)
            self.conv = TDoubleConv(cin, cout, cin // 2)
        else:
            self.up = tnn.ConvTranspose2d(cin, cin // 2, 2, stride=2)
            self.conv = TDoubleConv(cin, cout)

    def forward(self, x1, x2):
        x1 = self.up(x1)
        dy, dx = x2.shape[2] - x1.shape[2], x2.shape[3] - x1.shape[3]
        x1 = tnn.functional.pad(x1, [dx // 2, dx - dx // 2, dy // 2, dy - dy // 2])
        return self.conv(torch.cat([x2, x1], 1))


class TUNet(tnn.Module):
    def __init__(self, n_channels, n_classes, bilinear, c):
        super().__init__()
        f = 2 if bilinear else 1
        self.inc = TDoubleConv(n_channels, c)
        self.down1, self.down2 = TDown(c, 2 * c), TDown(2 * c, 4 * c)
        self.down3, self.down4 = TDown(4 * c, 8 * c), TDown(8 * c, 16 * c // f)
        self.up1, self.up2 = TUp(16 * c, 8 * c // f, bilinear), TUp(8 * c, 4 * c // f, bilinear)
        self.up3, self.up4 = TUp(4 * c, 2 * c // f, bilinear), TUp(2 * c, c, bilinear)
        self.outc = tnn.Sequential()
        self.outc.conv = tnn.Conv2d(c, n_classes, 1)

    def forward(self, x):
        x1 = self.inc(x)
        x2 = self.down1(x1)
        x3 = self.down2(x2)
        x4 = self.down3(x3)
        x = self.up1(self.down4(x4), x4)
        return self.outc(self.up4(self.up3(self.up2(x, x3), x2), x1))


@pytest.mark.parametrize("bilinear,size", [(False, 32), (True, 24)])
def test_unet_matches_the_twin(bilinear, size):
    torch.manual_seed(0)
    ref = randomize_batchnorm_(TUNet(3, 4, bilinear, 4))
    model = get_model("unet", n_channels=3, n_classes=4, bilinear=bilinear, base_channels=4)
    assert list(model.state_dict()) == list(ref.state_dict())
    model.load_state_dict(torch_state(ref))
    x = np.random.default_rng(0).random((2, 3, size, size), dtype=np.float32)
    model.eval(), ref.eval()
    np.testing.assert_allclose(model(x).data, ref(torch.from_numpy(x)).detach().numpy(),
                               rtol=1e-4, atol=1e-5)
    model.train(), ref.train()
    y, ty = model(x), ref(torch.from_numpy(x))
    w = np.random.default_rng(1).standard_normal(y.shape).astype(np.float32)
    (y * w).sum().backward()
    (ty * torch.from_numpy(w)).sum().backward()
    np.testing.assert_allclose(y.data, ty.detach().numpy(), rtol=1e-4, atol=1e-4)
    assert_grads_close(model, ref, ("inc.double_conv.0.weight", "up1.conv.double_conv.3.weight",
                                    "outc.conv.bias"))


def test_unet_paper_width_and_errors():
    # widths scale with base_channels (64, the paper's, gives milesial's 31M parameters)
    want = sum(p.numel() for p in TUNet(1, 2, False, 16).parameters())
    assert UNet(1, 2, base_channels=16).num_parameters() == want
    with pytest.raises(TypeError, match="UNet: bilinear must be a bool"):
        UNet(3, 2, bilinear="yes")
    with pytest.raises(ValueError, match="UNet: n_classes must be a positive int"):
        UNet(3, 0)


def test_iou_per_class_by_hand():
    target = np.array([[0, 0, 1, 1], [0, 2, 2, 1]])
    pred = np.array([[0, 1, 1, 1], [0, 2, 0, 0]])
    # class 0: pred {00,10,12,13} target {00,01,10}: inter 2 (00,10), union 5 -> 0.4
    # class 1: pred {01,02,03} target {02,03,13}: inter 2, union 4 -> 0.5
    # class 2: pred {11} target {11,12}: 1 / 2;  class 3: absent -> NaN
    ious = iou_per_class(pred, target, 4)
    np.testing.assert_allclose(ious[:3], [0.4, 0.5, 0.5])
    assert np.isnan(ious[3])
    assert mean_iou(pred, target, 4) == pytest.approx(1.4 / 3)
    assert mean_iou(pred, target, 4, ignore_background=True) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="iou_per_class: pred"):
        iou_per_class(pred[:1], target, 4)
