"""DenseNet-BC (Huang et al., 2017) as torchvision builds it: densenet121/161/169/201.

``features`` is ``conv0``, ``norm0``, ``relu0``, ``pool0``, then ``denseblock1`` ..
``denseblock4`` (each holds ``denselayer1`` .. ``denselayerN``) with ``transition1`` ..
``transition3`` between them and ``norm5``; ``classifier`` is the linear layer.  These
are the keys a torchvision model of today has; the old checkpoints' ``norm.1`` style
keys are renamed by ``python -m lezero.convert`` (as torchvision's loader does).
"""
import lezero.functions as F
from lezero import nn
from lezero.nn.models._weights import check_weights
from lezero.nn.models.registry import register_model
from lezero.utils.checks import check_bool, check_int, check_number

__all__ = ["DenseNet", "densenet121", "densenet161", "densenet169", "densenet201"]


class _DenseLayer(nn.Module):
    """BN-ReLU-1x1 convolution to ``bn_size * growth_rate`` channels (the bottleneck),
    then BN-ReLU-3x3 convolution to ``growth_rate`` new channels."""

    def __init__(self, num_input_features, growth_rate, bn_size, drop_rate,
                 memory_efficient=False):
        super().__init__()
        self.norm1 = nn.BatchNorm2d(num_input_features)
        self.relu1 = nn.ReLU(inplace=True)
        self.conv1 = nn.Conv2d(num_input_features, bn_size * growth_rate, kernel_size=1,
                               stride=1, bias=False)
        self.norm2 = nn.BatchNorm2d(bn_size * growth_rate)
        self.relu2 = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(bn_size * growth_rate, growth_rate, kernel_size=3, stride=1,
                               padding=1, bias=False)
        self.drop_rate = float(drop_rate)
        self.memory_efficient = memory_efficient

    def bn_function(self, *inputs):
        """The bottleneck of the concatenated earlier features."""
        return self.conv1(self.relu1(self.norm1(F.concatenate(list(inputs), axis=1))))

    def forward(self, input):
        features = [input] if not isinstance(input, (list, tuple)) else list(input)
        if self.memory_efficient and self.training:
            # Recompute the concatenation and bottleneck in backward instead of keeping
            # them: the memory saving torchvision gets from torch.utils.checkpoint.
            from lezero.checkpoint import checkpoint
            bottleneck = checkpoint(self.bn_function, *features)
        else:
            bottleneck = self.bn_function(*features)
        new = self.conv2(self.relu2(self.norm2(bottleneck)))
        if self.drop_rate > 0:
            new = F.dropout(new, p=self.drop_rate, training=self.training)
        return new


class _DenseBlock(nn.ModuleDict):
    """``num_layers`` dense layers, each fed every earlier layer's output."""

    def __init__(self, num_layers, num_input_features, bn_size, growth_rate, drop_rate,
                 memory_efficient=False):
        super().__init__()
        for i in range(num_layers):
            self.add_module(f"denselayer{i + 1}", _DenseLayer(
                num_input_features + i * growth_rate, growth_rate, bn_size, drop_rate,
                memory_efficient))

    def forward(self, init_features):
        features = [init_features]
        for layer in self.values():
            features.append(layer(features))
        return F.concatenate(features, axis=1)


class _Transition(nn.Sequential):
    """BN-ReLU-1x1 convolution halving the channels, then 2x2 average pooling."""

    def __init__(self, num_input_features, num_output_features):
        super().__init__()
        self.norm = nn.BatchNorm2d(num_input_features)
        self.relu = nn.ReLU(inplace=True)
        self.conv = nn.Conv2d(num_input_features, num_output_features, kernel_size=1,
                              stride=1, bias=False)
        self.pool = nn.AvgPool2d(kernel_size=2, stride=2)


class DenseNet(nn.Module):
    """DenseNet-BC: ``growth_rate`` channels per layer, ``block_config`` layers per
    block, a ``num_init_features`` stem, bottlenecks ``bn_size * growth_rate`` wide,
    dropout ``drop_rate`` after each layer; ``memory_efficient`` recomputes bottlenecks
    in backward (``lz.checkpoint``)."""

    def __init__(self, growth_rate=32, block_config=(6, 12, 24, 16), num_init_features=64,
                 bn_size=4, drop_rate=0, num_classes=1000, memory_efficient=False):
        super().__init__()
        name = "DenseNet"
        for arg, v in (("growth_rate", growth_rate), ("num_init_features", num_init_features),
                       ("bn_size", bn_size), ("num_classes", num_classes)):
            check_int(name, arg, v, low=1)
        check_number(name, "drop_rate", drop_rate, 0.0, 1.0)
        check_bool(name, "memory_efficient", memory_efficient)
        self.features = nn.Sequential()
        for key, m in (("conv0", nn.Conv2d(3, num_init_features, kernel_size=7, stride=2,
                                            padding=3, bias=False)),
                       ("norm0", nn.BatchNorm2d(num_init_features)),
                       ("relu0", nn.ReLU(inplace=True)),
                       ("pool0", nn.MaxPool2d(kernel_size=3, stride=2, padding=1))):
            self.features.add_module(key, m)
        num_features = num_init_features
        for i, num_layers in enumerate(block_config):
            check_int(name, "block_config entries", num_layers, low=1)
            self.features.add_module(f"denseblock{i + 1}", _DenseBlock(
                num_layers, num_features, bn_size, growth_rate, drop_rate, memory_efficient))
            num_features += num_layers * growth_rate
            if i != len(block_config) - 1:
                self.features.add_module(f"transition{i + 1}",
                                         _Transition(num_features, num_features // 2))
                num_features //= 2
        self.features.add_module("norm5", nn.BatchNorm2d(num_features))
        self.classifier = nn.Linear(num_features, num_classes)
        for m in self.modules():        # the official initialisation, as torchvision's
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight)
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Linear):
                nn.init.zeros_(m.bias)

    def forward(self, x):
        out = F.relu(self.features(x))
        out = F.adaptive_avg_pool2d(out, (1, 1))
        return self.classifier(F.flatten(out, 1))


def _densenet(name, growth_rate, block_config, num_init_features, weights, progress,
              kwargs):
    check_weights(name, weights, progress)
    return DenseNet(growth_rate, block_config, num_init_features, **kwargs)


@register_model()
def densenet121(*, weights=None, progress=True, **kwargs):
    """DenseNet-121 (growth 32, blocks 6-12-24-16); ``kwargs`` go to ``DenseNet``."""
    return _densenet("densenet121", 32, (6, 12, 24, 16), 64, weights, progress, kwargs)


@register_model()
def densenet161(*, weights=None, progress=True, **kwargs):
    """DenseNet-161 (growth 48, blocks 6-12-36-24, 96 stem channels)."""
    return _densenet("densenet161", 48, (6, 12, 36, 24), 96, weights, progress, kwargs)


@register_model()
def densenet169(*, weights=None, progress=True, **kwargs):
    """DenseNet-169 (growth 32, blocks 6-12-32-32)."""
    return _densenet("densenet169", 32, (6, 12, 32, 32), 64, weights, progress, kwargs)


@register_model()
def densenet201(*, weights=None, progress=True, **kwargs):
    """DenseNet-201 (growth 32, blocks 6-12-48-32)."""
    return _densenet("densenet201", 32, (6, 12, 48, 32), 64, weights, progress, kwargs)
