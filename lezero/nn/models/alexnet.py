"""AlexNet (Krizhevsky et al., 2012) as torchvision builds it ("one weird trick" variant).

``features`` (five convolutions with ReLU and three max pools), ``avgpool`` (adaptive,
6x6) and ``classifier`` (dropout, 9216 -> 4096, ReLU, dropout, 4096 -> 4096, ReLU,
4096 -> classes): torchvision's keys, so its ``state_dict`` loads as it is.  Inputs
must be at least 63x63 (the last max pool needs a 3x3 map).
"""
import lezero.functions as F
from lezero import nn
from lezero.nn.models._weights import check_weights
from lezero.nn.models.registry import register_model
from lezero.utils.checks import check_int, check_number

__all__ = ["AlexNet", "alexnet"]


class AlexNet(nn.Module):
    """AlexNet with ``num_classes`` outputs and dropout ``dropout`` in the classifier."""

    def __init__(self, num_classes=1000, dropout=0.5):
        super().__init__()
        check_int("AlexNet", "num_classes", num_classes, low=1)
        check_number("AlexNet", "dropout", dropout, 0.0, 1.0)
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, kernel_size=11, stride=4, padding=2), nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2),
            nn.Conv2d(64, 192, kernel_size=5, padding=2), nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2),
            nn.Conv2d(192, 384, kernel_size=3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(384, 256, kernel_size=3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(256, 256, kernel_size=3, padding=1), nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2))
        self.avgpool = nn.AdaptiveAvgPool2d((6, 6))
        self.classifier = nn.Sequential(
            nn.Dropout(p=dropout), nn.Linear(256 * 6 * 6, 4096), nn.ReLU(inplace=True),
            nn.Dropout(p=dropout), nn.Linear(4096, 4096), nn.ReLU(inplace=True),
            nn.Linear(4096, num_classes))

    def forward(self, x):
        if x.ndim != 4 or min(x.shape[2:]) < 63:
            raise ValueError(f"AlexNet: input must be (N, 3, H, W) with H, W >= 63, got "
                             f"shape {x.shape}")
        x = self.avgpool(self.features(x))
        return self.classifier(F.flatten(x, 1))


@register_model()
def alexnet(*, weights=None, progress=True, **kwargs):
    """AlexNet; ``kwargs`` (``num_classes``, ``dropout``) go to ``AlexNet``."""
    check_weights("alexnet", weights, progress)
    return AlexNet(**kwargs)
