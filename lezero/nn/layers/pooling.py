"""Pooling, resizing and patch layers: thin modules over the ``lezero.functions``
operators of the same names, with ``torch.nn``'s constructor arguments.

They have no parameters.  Arguments are stored as given (``kernel_size=2`` stays an int,
as in PyTorch); their kinds are checked when the layer is made, their values by the
operator on the first call, whose error is reported with the layer's name.
"""
import lezero.functions as F
from lezero.nn.layers._utils import REQUIRED, OpModule, named_errors, op_module
_KERNEL = ("kernel_size", REQUIRED, "size")
_STRIDE = ("stride", None, "size?")
_PADDING = ("padding", 0, "size")
_DILATION = ("dilation", 1, "size")
_CEIL = ("ceil_mode", False, "bool")
_INDICES = ("return_indices", False, "bool")
_OUTPUT = ("output_size", REQUIRED, "size?")


class _WindowPool(OpModule):
    """A sliding-window pool: ``stride=None`` means ``stride = kernel_size``, stored as such
    (PyTorch's ``MaxPool2d(2).stride`` is 2)."""

    def _validate(self):
        if self.stride is None:
            self.stride = self.kernel_size


class MaxPool1d(op_module(F.max_pool1d, _KERNEL, _STRIDE, _PADDING, _DILATION, _INDICES,
                          _CEIL, base=_WindowPool)):
    """Max over sliding windows of (N, C, L), as ``torch.nn.MaxPool1d``; with
    ``return_indices`` also the positions (for ``MaxUnpool1d``)."""


class MaxPool2d(op_module(F.max_pool2d, _KERNEL, _STRIDE, _PADDING, _DILATION, _INDICES,
                          _CEIL, base=_WindowPool)):
    """Max over sliding windows of (N, C, H, W), as ``torch.nn.MaxPool2d``; with
    ``return_indices`` also the positions (for ``MaxUnpool2d``)."""


class MaxPool3d(op_module(F.max_pool3d, _KERNEL, _STRIDE, _PADDING, _DILATION, _INDICES,
                          _CEIL, base=_WindowPool)):
    """Max over sliding windows of (N, C, D, H, W), as ``torch.nn.MaxPool3d``; with
    ``return_indices`` also the flat positions ``(d * H + h) * W + w``."""


class AvgPool1d(op_module(F.avg_pool1d, _KERNEL, _STRIDE, _PADDING, _CEIL,
                          ("count_include_pad", True, "bool"), base=_WindowPool)):
    """Mean over sliding windows of (N, C, L), as ``torch.nn.AvgPool1d``."""


class AvgPool2d(op_module(F.avg_pool2d, _KERNEL, _STRIDE, _PADDING, _CEIL,
                          ("count_include_pad", True, "bool"),
                          ("divisor_override", None, "int?"), base=_WindowPool)):
    """Mean over sliding windows of (N, C, H, W), as ``torch.nn.AvgPool2d``."""


class AvgPool3d(op_module(F.avg_pool3d, _KERNEL, _STRIDE, _PADDING, _CEIL,
                          ("count_include_pad", True, "bool"),
                          ("divisor_override", None, "int?"), base=_WindowPool)):
    """Mean over sliding windows of (N, C, D, H, W), as ``torch.nn.AvgPool3d``."""


class LPPool1d(op_module(F.lp_pool1d, ("norm_type", REQUIRED, "number"), _KERNEL, _STRIDE,
                         _CEIL)):
    """(sum of x ** p over each window) ** (1 / p) on (N, C, L), as ``torch.nn.LPPool1d``."""


class LPPool2d(op_module(F.lp_pool2d, ("norm_type", REQUIRED, "number"), _KERNEL, _STRIDE,
                         _CEIL)):
    """(sum of x ** p over each window) ** (1 / p) on (N, C, H, W), as
    ``torch.nn.LPPool2d``."""


class AdaptiveAvgPool1d(op_module(F.adaptive_avg_pool1d, _OUTPUT)):
    """Average pooling of (N, C, L) to length ``output_size``, as
    ``torch.nn.AdaptiveAvgPool1d``."""


class AdaptiveAvgPool2d(op_module(F.adaptive_avg_pool2d, _OUTPUT)):
    """Average pooling of (N, C, H, W) to ``output_size`` (None keeps an input size), as
    ``torch.nn.AdaptiveAvgPool2d``."""


class AdaptiveAvgPool3d(op_module(F.adaptive_avg_pool3d, _OUTPUT)):
    """Average pooling of (N, C, D, H, W) to ``output_size`` (None keeps an input size), as
    ``torch.nn.AdaptiveAvgPool3d``."""


class AdaptiveMaxPool1d(op_module(F.adaptive_max_pool1d, _OUTPUT, _INDICES)):
    """Max pooling of (N, C, L) to length ``output_size``, as ``torch.nn.AdaptiveMaxPool1d``."""


class AdaptiveMaxPool2d(op_module(F.adaptive_max_pool2d, _OUTPUT, _INDICES)):
    """Max pooling of (N, C, H, W) to ``output_size``, as ``torch.nn.AdaptiveMaxPool2d``."""


class AdaptiveMaxPool3d(op_module(F.adaptive_max_pool3d, _OUTPUT, _INDICES)):
    """Max pooling of (N, C, D, H, W) to ``output_size``, as
    ``torch.nn.AdaptiveMaxPool3d``."""


class _MaxUnpool(OpModule):
    """Unpooling takes the pooled values, their indices and an optional output size."""

    def forward(self, input, indices, output_size=None):
        with named_errors(type(self).__name__):
            return self._fn(input, indices, output_size=output_size, **self._options())


class MaxUnpool1d(op_module(F.max_unpool1d, _KERNEL, _STRIDE, _PADDING, base=_MaxUnpool)):
    """Put (N, C, L) values back where ``MaxPool1d`` found them (zeros elsewhere), as
    ``torch.nn.MaxUnpool1d``."""


class MaxUnpool2d(op_module(F.max_unpool2d, _KERNEL, _STRIDE, _PADDING, base=_MaxUnpool)):
    """Put (N, C, H, W) values back where ``MaxPool2d`` found them (zeros elsewhere), as
    ``torch.nn.MaxUnpool2d``; ``output_size`` resolves an ambiguous output shape."""


class Upsample(op_module(F.interpolate, ("size", None, "any"), ("scale_factor", None, "any"),
                         ("mode", "nearest", "any"), ("align_corners", None, "any"),
                         ("recompute_scale_factor", None, "any"))):
    """Resize the spatial dims to ``size`` or by ``scale_factor`` ("nearest", "linear",
    "bilinear", "trilinear", ...), as ``torch.nn.Upsample``."""


class UpsamplingNearest2d(op_module(F.interpolate, ("size", None, "any"),
                                    ("scale_factor", None, "any"))):
    """Nearest-neighbour upsampling of (N, C, H, W), as ``torch.nn.UpsamplingNearest2d``."""

    def _options(self):
        return dict(super()._options(), mode="nearest")


class UpsamplingBilinear2d(op_module(F.interpolate, ("size", None, "any"),
                                     ("scale_factor", None, "any"))):
    """Bilinear upsampling of (N, C, H, W) with corners aligned, as
    ``torch.nn.UpsamplingBilinear2d``."""

    def _options(self):
        return dict(super()._options(), mode="bilinear", align_corners=True)


class PixelShuffle(op_module(F.pixel_shuffle, ("upscale_factor", REQUIRED, "int"))):
    """(N, C r^2, H, W) -> (N, C, H r, W r), as ``torch.nn.PixelShuffle``."""


class PixelUnshuffle(op_module(F.pixel_unshuffle, ("downscale_factor", REQUIRED, "int"))):
    """(N, C, H r, W r) -> (N, C r^2, H, W), as ``torch.nn.PixelUnshuffle``."""


class ChannelShuffle(op_module(F.channel_shuffle, ("groups", REQUIRED, "int"))):
    """(N, C, *) with the channels in ``groups`` interleaved (ShuffleNet), as
    ``torch.nn.ChannelShuffle``."""


class Unfold(op_module(F.unfold, _KERNEL, _DILATION, _PADDING, ("stride", 1, "any"))):
    """Sliding blocks of (N, C, H, W) as columns (N, C kh kw, L) (im2col), as
    ``torch.nn.Unfold``."""


class Fold(op_module(F.fold, _OUTPUT, _KERNEL, _DILATION, _PADDING, ("stride", 1, "any"))):
    """Columns (N, C kh kw, L) summed back into (N, C, *output_size) (col2im), as
    ``torch.nn.Fold``."""
