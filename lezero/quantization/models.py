"""Zoo models made quantizable in eager mode, their weights and ``state_dict`` keys kept.

A model quantizes as it is when its forward only chains modules and views (LeNet5:
``QuantWrapper(LeNet5(...))``; ``F.flatten`` keeps a quantized tensor's parameters).
ResNet needs three changes, the ones torchvision's quantizable ResNet makes: the
residual ``out + identity`` and the ReLU after it become ``FloatFunctional.add_relu``
(one integer addition), each ReLU module is used once (so conv + bn + relu can fuse),
and the model starts with a QuantStub and ends with a DeQuantStub.
"""
import lezero.functions as F
from lezero import nn
from lezero.nn.models.resnet import BasicBlock, Bottleneck, ResNet
from lezero.quantization.stubs import DeQuantStub, FloatFunctional, QuantStub

__all__ = ["quantizable_resnet", "QuantizableResNet", "QuantizableBasicBlock",
           "QuantizableBottleneck"]


class QuantizableBasicBlock(BasicBlock):
    """A BasicBlock whose residual addition is ``skip_add.add_relu``."""

    fusion_groups = [["conv1", "bn1", "relu"], ["conv2", "bn2"]]

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        identity = x if self.downsample is None else self.downsample(x)
        return self.skip_add.add_relu(out, identity)


class QuantizableBottleneck(Bottleneck):
    """A Bottleneck with one ReLU module per use and ``skip_add.add_relu``."""

    fusion_groups = [["conv1", "bn1", "relu"], ["conv2", "bn2", "relu2"], ["conv3", "bn3"]]

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu2(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        identity = x if self.downsample is None else self.downsample(x)
        return self.skip_add.add_relu(out, identity)


class QuantizableResNet(ResNet):
    """ResNet between a QuantStub and a DeQuantStub."""

    fusion_groups = [["conv1", "bn1", "relu"]]

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(self.quant(x)))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.dequant(self.fc(F.flatten(self.avgpool(x), 1)))


def quantizable_resnet(model):
    """Make a zoo ``ResNet`` quantizable in place (see the module docstring); returns it.
    Parameters and ``state_dict`` keys are unchanged (stubs and FloatFunctionals hold
    no state until ``prepare``)."""
    if not isinstance(model, ResNet):
        raise TypeError(f"quantizable_resnet: expected a lezero ResNet, got "
                        f"{type(model).__name__}")
    for m in model.modules():
        if type(m) is BasicBlock:
            m.__class__ = QuantizableBasicBlock
        elif type(m) is Bottleneck:
            m.__class__ = QuantizableBottleneck
            m.relu2 = nn.ReLU()
        else:
            continue
        m.skip_add = FloatFunctional()
    model.__class__ = QuantizableResNet
    model.quant, model.dequant = QuantStub(), DeQuantStub()
    return model
