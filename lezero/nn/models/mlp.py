"""``MLP``: a stack of fully connected layers, laid out as ``torchvision.ops.MLP``."""
from lezero import nn


class MLP(nn.Sequential):
    """Linear layers of widths ``hidden_channels`` (the last one is the output), each but
    the last followed by an optional norm, the activation and dropout.

    The layout (and so the ``state_dict`` keys ``0.weight``, ``3.weight``, ...) is
    ``torchvision.ops.MLP``'s, dropout after the last layer included::

        MLP(64, [128, 64, 10])      # 64 -> 128 -> 64 -> 10 with ReLU between

    Inputs of shape (..., in_channels) are accepted; images are flattened by the caller
    (or pass ``flatten=True`` to flatten every axis after the batch axis first).
    """

    def __init__(self, in_channels, hidden_channels, norm_layer=None,
                 activation_layer=nn.ReLU, dropout=0.0, bias=True, flatten=False):
        if not hidden_channels:
            raise ValueError("MLP: hidden_channels must list at least the output width")
        layers = [nn.Flatten()] if flatten else []
        width = in_channels
        for hidden in hidden_channels[:-1]:
            layers.append(nn.Linear(width, hidden, bias=bias))
            if norm_layer is not None:
                layers.append(norm_layer(hidden))
            layers += [activation_layer(), nn.Dropout(dropout)]
            width = hidden
        layers += [nn.Linear(width, hidden_channels[-1], bias=bias), nn.Dropout(dropout)]
        super().__init__(*layers)
