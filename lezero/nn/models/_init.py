"""Weight initialisations shared by the convolutional models (torchvision's choices)."""
from lezero import nn


def init_cnn_(model, linear_std=None):
    """torchvision's scheme for VGG, ResNet and MobileNetV2, applied to every submodule:
    convolutions get Kaiming-normal weights (fan_out, ReLU gain) and zero biases, norm
    layers weight 1 and bias 0; linear layers get N(0, ``linear_std``) weights and zero
    biases, or keep PyTorch's default when ``linear_std`` is None (ResNet)."""
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Linear) and linear_std is not None:
            nn.init.normal_(m.weight, 0.0, linear_std)
            nn.init.zeros_(m.bias)
