"""ResNet (He et al., 2015) with torchvision's layout, names and initialisation.

Names match torchvision (``conv1``, ``bn1``, ``layer1.0.conv1``, ``layer2.0.downsample.0``,
``fc``), so a torchvision ``state_dict`` (as NumPy arrays) loads with ``strict=True``.
"""
import lezero.functions as F
from lezero import nn
from lezero.nn.inference_fusion import conv_bn, sequential
from lezero.nn.models._weights import check_weights
from lezero.nn.models._init import init_cnn_


def conv3x3(in_planes, out_planes, stride=1, groups=1, dilation=1):
    """3x3 convolution with padding (no bias: a norm layer follows)."""
    return nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride, padding=dilation,
                     groups=groups, bias=False, dilation=dilation)


def conv1x1(in_planes, out_planes, stride=1):
    """1x1 convolution (no bias)."""
    return nn.Conv2d(in_planes, out_planes, kernel_size=1, stride=stride, bias=False)


def _identity(block, x):
    """A block's residual branch: ``x`` or its downsampling (fused in inference)."""
    return x if block.downsample is None else sequential(block.downsample, x)


class BasicBlock(nn.Module):
    """Two 3x3 convolutions with a residual connection (ResNet-18/34)."""

    expansion = 1

    def __init__(self, inplanes, planes, stride=1, downsample=None, groups=1, base_width=64,
                 dilation=1, norm_layer=None):
        super().__init__()
        norm_layer = norm_layer or nn.BatchNorm2d
        if groups != 1 or base_width != 64:
            raise ValueError("BasicBlock only supports groups=1 and base_width=64")
        if dilation > 1:
            raise ValueError("BasicBlock does not support dilation > 1")
        self.conv1 = conv3x3(inplanes, planes, stride)
        self.bn1 = norm_layer(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = conv3x3(planes, planes)
        self.bn2 = norm_layer(planes)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x):
        out = conv_bn(self.conv1, self.bn1, x, self.relu)
        out = conv_bn(self.conv2, self.bn2, out)
        return self.relu(out + _identity(self, x))


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3 (strided here, as in torchvision's "ResNet V1.5"), 1x1 expand by 4,
    with a residual connection (ResNet-50 and deeper)."""

    expansion = 4

    def __init__(self, inplanes, planes, stride=1, downsample=None, groups=1, base_width=64,
                 dilation=1, norm_layer=None):
        super().__init__()
        norm_layer = norm_layer or nn.BatchNorm2d
        width = int(planes * (base_width / 64.0)) * groups
        self.conv1 = conv1x1(inplanes, width)
        self.bn1 = norm_layer(width)
        self.conv2 = conv3x3(width, width, stride, groups, dilation)
        self.bn2 = norm_layer(width)
        self.conv3 = conv1x1(width, planes * self.expansion)
        self.bn3 = norm_layer(planes * self.expansion)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x):
        out = conv_bn(self.conv1, self.bn1, x, self.relu)
        out = conv_bn(self.conv2, self.bn2, out, self.relu)
        out = conv_bn(self.conv3, self.bn3, out)
        return self.relu(out + _identity(self, x))


class ResNet(nn.Module):
    """A stem, four stages of residual blocks (``layers`` blocks each), global average
    pooling and a linear classifier ``fc``.

    ``small_input=True`` swaps the ImageNet stem (7x7 stride-2 convolution and a max pool)
    for a 3x3 stride-1 convolution and no pool, the usual choice for 32x32 images; the
    ``state_dict`` keys stay the same.  ``base_width`` scales every stage (64 is the
    paper's; 16 makes a CPU-sized network).  ``zero_init_residual`` starts each block's last
    norm at zero, so every block begins as the identity.  ``groups`` and
    ``width_per_group`` make ResNeXt and wide ResNets (torchvision's meaning);
    ``replace_stride_with_dilation`` (three bools, for layer2..layer4) keeps the resolution
    of those stages and dilates their convolutions instead, as in segmentation backbones.
    """

    def __init__(self, block, layers, num_classes=1000, zero_init_residual=False, groups=1,
                 width_per_group=64, replace_stride_with_dilation=None, norm_layer=None,
                 in_channels=3, small_input=False, base_width=64):
        super().__init__()
        self._norm_layer = norm_layer or nn.BatchNorm2d
        self.inplanes = base_width
        self.dilation = 1
        dilate = replace_stride_with_dilation or [False, False, False]
        if len(dilate) != 3:
            raise ValueError("ResNet: replace_stride_with_dilation must be None or 3 bools, "
                             f"got {replace_stride_with_dilation!r}")
        self.groups = groups
        self.base_width = width_per_group
        if small_input:
            self.conv1 = nn.Conv2d(in_channels, self.inplanes, 3, 1, 1, bias=False)
        else:
            self.conv1 = nn.Conv2d(in_channels, self.inplanes, 7, 2, 3, bias=False)
        self.bn1 = self._norm_layer(self.inplanes)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.Identity() if small_input else nn.MaxPool2d(3, 2, 1)
        widths = [base_width * 2 ** i for i in range(4)]
        self.layer1 = self._make_layer(block, widths[0], layers[0])
        self.layer2 = self._make_layer(block, widths[1], layers[1], 2, dilate[0])
        self.layer3 = self._make_layer(block, widths[2], layers[2], 2, dilate[1])
        self.layer4 = self._make_layer(block, widths[3], layers[3], 2, dilate[2])
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(widths[3] * block.expansion, num_classes)
        init_cnn_(self)
        if zero_init_residual:
            for m in self.modules():
                last = getattr(m, "bn3" if isinstance(m, Bottleneck) else "bn2", None)
                if isinstance(m, (BasicBlock, Bottleneck)) and last.weight is not None:
                    nn.init.zeros_(last.weight)

    def _make_layer(self, block, planes, blocks, stride=1, dilate=False):
        previous_dilation = self.dilation
        if dilate:
            self.dilation *= stride
            stride = 1
        downsample = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(conv1x1(self.inplanes, planes * block.expansion, stride),
                                       self._norm_layer(planes * block.expansion))
        layers = [block(self.inplanes, planes, stride, downsample, self.groups, self.base_width,
                        previous_dilation, self._norm_layer)]
        self.inplanes = planes * block.expansion
        for _ in range(1, blocks):
            layers.append(block(self.inplanes, planes, groups=self.groups,
                                base_width=self.base_width, dilation=self.dilation,
                                norm_layer=self._norm_layer))
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.maxpool(conv_bn(self.conv1, self.bn1, x, self.relu))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(F.flatten(self.avgpool(x), 1))


def resnet18(*, weights=None, progress=True, **kwargs):
    """ResNet-18: BasicBlocks [2, 2, 2, 2]; keyword arguments go to ``ResNet``."""
    check_weights("resnet18", weights, progress)
    return ResNet(BasicBlock, [2, 2, 2, 2], **kwargs)


def resnet34(*, weights=None, progress=True, **kwargs):
    """ResNet-34: BasicBlocks [3, 4, 6, 3]."""
    check_weights("resnet34", weights, progress)
    return ResNet(BasicBlock, [3, 4, 6, 3], **kwargs)


def resnet50(*, weights=None, progress=True, **kwargs):
    """ResNet-50: Bottlenecks [3, 4, 6, 3]."""
    check_weights("resnet50", weights, progress)
    return ResNet(Bottleneck, [3, 4, 6, 3], **kwargs)
