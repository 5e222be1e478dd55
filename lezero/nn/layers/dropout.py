"""Dropout layers: active in training mode, the identity after ``eval()``.

Each passes ``training=self.training`` to its operator, so the module's own mode decides
(``lz.test_mode()`` only matters for operators called directly).  Masks come from the
process generator: ``lz.manual_seed`` reproduces them.
"""
import lezero.functions as F
from lezero.nn.layers._utils import named_errors
from lezero.nn.module import Module
from lezero.utils.checks import check_bools, check_number


class _DropoutNd(Module):
    """Shared constructor: drop probability ``p`` in [0, 1]; ``inplace`` is accepted for
    PyTorch compatibility and has no effect (operators always return a new Variable)."""

    _fn = None

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        self.p = check_number(type(self).__name__, "p", p, 0.0, 1.0)
        check_bools(type(self).__name__, inplace=inplace)
        self.inplace = inplace

    def forward(self, input):
        with named_errors(type(self).__name__):
            return self._fn(input, self.p, training=self.training)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


class Dropout(_DropoutNd):
    """Zero each element with probability ``p`` and scale the rest by 1 / (1 - p), as
    ``torch.nn.Dropout``."""

    _fn = staticmethod(F.dropout)


class Dropout1d(_DropoutNd):
    """Zero whole channels of (N, C, L) (or (C, L)) with probability ``p``, as
    ``torch.nn.Dropout1d``."""

    _fn = staticmethod(F.dropout1d)


class Dropout2d(_DropoutNd):
    """Zero whole channels of (N, C, H, W) with probability ``p``, as
    ``torch.nn.Dropout2d``; a 3-D input is read as (N, C, L), as PyTorch currently does
    (use ``Dropout1d`` for that layout)."""

    _fn = staticmethod(F.dropout2d)


class Dropout3d(_DropoutNd):
    """Zero whole channels of (N, C, D, H, W) (or (C, D, H, W)) with probability ``p``, as
    ``torch.nn.Dropout3d``."""

    _fn = staticmethod(F.dropout3d)


class AlphaDropout(_DropoutNd):
    """Dropout that keeps a SELU network's mean and variance (dropped values saturate to
    SELU's negative limit, then an affine map restores the moments), as
    ``torch.nn.AlphaDropout``."""

    _fn = staticmethod(F.alpha_dropout)
