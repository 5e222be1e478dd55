"""``LeNet5``: LeCun et al.'s 1998 convolutional network, sized for any small input."""
import lezero.functions as F
from lezero import nn


def _conv_out(size, kernel, padding):
    return size + 2 * padding - kernel + 1


class LeNet5(nn.Module):
    """Two 5x5 convolutions (6 and 16 channels) with 2x2 pooling, then 120-84-classes.

    ``input_size`` 32 is the original (no padding); 28 pads the first convolution by 2
    (the usual MNIST variant); smaller inputs such as scikit-learn's 8x8 digits pad both
    convolutions by 2 so the feature maps do not vanish.  ``activation`` is "relu" (the
    modern choice, trains faster) or "tanh" (the original); ``pool`` is "max" or "avg".
    ``channels`` and ``hidden`` change the widths (the paper's are (6, 16) and (120, 84)).

    Submodules: ``features`` (conv, act, pool, conv, act, pool) and ``classifier``
    (Linear, act, Linear, act, Linear).
    """

    def __init__(self, num_classes=10, in_channels=1, input_size=32, activation="relu",
                 pool="max", channels=(6, 16), hidden=(120, 84)):
        super().__init__()
        acts = {"relu": nn.ReLU, "tanh": nn.Tanh}
        pools = {"max": nn.MaxPool2d, "avg": nn.AvgPool2d}
        if activation not in acts:
            raise ValueError(f"LeNet5: activation must be 'relu' or 'tanh', got {activation!r}")
        if pool not in pools:
            raise ValueError(f"LeNet5: pool must be 'max' or 'avg', got {pool!r}")
        if input_size < 8:
            raise ValueError(f"LeNet5: input_size must be at least 8, got {input_size}")
        pad1 = 0 if input_size >= 32 else 2
        pad2 = 0 if input_size >= 28 else 2
        size = _conv_out(input_size, 5, pad1) // 2
        size = _conv_out(size, 5, pad2) // 2
        act, pool_layer = acts[activation], pools[pool]
        self.input_size = input_size
        (c1, c2), (h1, h2) = channels, hidden
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, c1, 5, padding=pad1), act(), pool_layer(2),
            nn.Conv2d(c1, c2, 5, padding=pad2), act(), pool_layer(2))
        self.classifier = nn.Sequential(
            nn.Linear(c2 * size * size, h1), act(),
            nn.Linear(h1, h2), act(),
            nn.Linear(h2, num_classes))

    def forward(self, x):
        if x.ndim == 3:             # (N, H, W) grey images: add the channel axis
            x = F.expand_dims(x, 1)
        return self.classifier(F.flatten(self.features(x), 1))
