"""Convolution layers with PyTorch's constructor arguments and weight layouts."""
import lezero.functions as F
from lezero.nn.layers._utils import lazy_layer, reset_fan_in_uniform, weight_and_bias
from lezero.nn.module import Module
from lezero.utils.checks import check_positive_ints, ntuple


class _ConvNd(Module):
    """Shared constructor: weight (out, in/groups, *k) or, transposed, (in, out/groups, *k)."""

    n = 2
    transposed = False

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 dilation=1, groups=1, bias=True, padding_mode="zeros"):
        super().__init__()
        name = type(self).__name__
        check_positive_ints(name, in_channels=in_channels, out_channels=out_channels,
                            groups=groups)
        if in_channels % groups or out_channels % groups:
            raise ValueError(f"{name}: in_channels ({in_channels}) and out_channels "
                             f"({out_channels}) must be divisible by groups ({groups})")
        if padding_mode not in ("zeros", "reflect", "replicate", "circular"):
            raise ValueError(f"{name}: padding_mode must be 'zeros', 'reflect', 'replicate' "
                             f"or 'circular', got {padding_mode!r}")
        if padding_mode != "zeros" and self.transposed:
            raise ValueError(f"{name}: only padding_mode='zeros' is supported, got "
                             f"{padding_mode!r}")
        self.padding_mode = padding_mode
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size = ntuple(name, "kernel_size", kernel_size, self.n, low=1)
        self.stride = ntuple(name, "stride", stride, self.n, low=1)
        self.dilation = ntuple(name, "dilation", dilation, self.n, low=1)
        takes_string = isinstance(padding, str) and not self.transposed   # "same", "valid"
        self.padding = padding if takes_string else ntuple(name, "padding", padding, self.n,
                                                           low=0)
        self.output_padding = (0,) * self.n       # a transposed layer sets its own
        if self.transposed:
            shape = (in_channels, out_channels // groups) + self.kernel_size
        else:
            shape = (out_channels, in_channels // groups) + self.kernel_size
        weight_and_bias(self, shape, out_channels, bias)
        self.reset_parameters()

    def reset_parameters(self):
        reset_fan_in_uniform(self.weight, self.bias)

    def _pad_explicitly(self, x):
        """For padding modes other than zeros, pad the input with F.pad first (the
        convolution then pads nothing); returns (input, the padding to give the conv)."""
        if self.padding_mode == "zeros" or self.padding == "valid":
            return x, self.padding
        if self.padding == "same":       # PyTorch's split: the odd element goes after
            total = [d * (k - 1) for d, k in zip(self.dilation, self.kernel_size)]
            pairs = [(t // 2, t - t // 2) for t in total]
        else:
            pairs = [(p, p) for p in self.padding]
        return F.pad(x, ((0, 0), (0, 0), *pairs), mode=self.padding_mode), 0

    def _check_input(self, x):
        if x.ndim != self.n + 2 or x.shape[1] != self.in_channels:
            raise ValueError(f"{type(self).__name__}: expected input of shape (N, "
                             f"{self.in_channels}, ...) with {self.n} spatial dims, got {x.shape}")

    def extra_repr(self):
        """PyTorch's wording: the options left at their defaults are not shown."""
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        if self.padding != (0,) * self.n:
            s += f", padding={self.padding}"
        if self.dilation != (1,) * self.n:
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * self.n:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class _Conv(_ConvNd):
    """Conv1d/2d/3d: ``_function`` is the operator (``F.conv2d`` ...)."""

    def forward(self, x):
        self._check_input(x)
        x, padding = self._pad_explicitly(x)
        return self._function(x, self.weight, self.bias, self.stride, padding, self.dilation,
                              self.groups)


class _ConvTranspose(_ConvNd):
    """ConvTranspose1d/2d/3d, with PyTorch's positional order (output_padding, groups,
    bias, dilation), which differs from Conv's."""

    transposed = True

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 output_padding=0, groups=1, bias=True, dilation=1, padding_mode="zeros"):
        super().__init__(in_channels, out_channels, kernel_size, stride=stride,
                         padding=padding, dilation=dilation, groups=groups, bias=bias,
                         padding_mode=padding_mode)
        self.output_padding = ntuple(type(self).__name__, "output_padding", output_padding,
                                     self.n, low=0)

    def forward(self, x):
        self._check_input(x)
        return self._function(x, self.weight, self.bias, self.stride, self.padding,
                              self.output_padding, self.groups, self.dilation)


class Conv1d(_Conv):
    """1-D convolution over (N, C, L), as ``torch.nn.Conv1d``."""

    n, _function = 1, staticmethod(F.conv1d)


class Conv2d(_Conv):
    """2-D convolution over (N, C, H, W), as ``torch.nn.Conv2d``."""

    n, _function = 2, staticmethod(F.conv2d)


class Conv3d(_Conv):
    """3-D convolution over (N, C, D, H, W), as ``torch.nn.Conv3d``."""

    n, _function = 3, staticmethod(F.conv3d)


class ConvTranspose1d(_ConvTranspose):
    """Transposed 1-D convolution, as ``torch.nn.ConvTranspose1d``."""

    n, _function = 1, staticmethod(F.conv_transpose1d)


class ConvTranspose2d(_ConvTranspose):
    """Transposed 2-D convolution, as ``torch.nn.ConvTranspose2d``."""

    n, _function = 2, staticmethod(F.conv_transpose2d)


class ConvTranspose3d(_ConvTranspose):
    """Transposed 3-D convolution over (N, C, D, H, W), as ``torch.nn.ConvTranspose3d``."""

    n, _function = 3, staticmethod(F.conv_transpose3d)


def _in_channels(layer, x):
    """A lazy convolution's ``in_channels``: axis 1 of an (N, C, *spatial) input."""
    if x.ndim != layer.n + 2:
        raise ValueError(f"{type(layer).__name__}: expected input of shape (N, C, ...) with "
                         f"{layer.n} spatial dims, got {x.shape}")
    return x.shape[1]


class LazyConv1d(lazy_layer(Conv1d, _in_channels)):
    """Conv1d with ``in_channels`` inferred from the first input."""


class LazyConv2d(lazy_layer(Conv2d, _in_channels)):
    """Conv2d with ``in_channels`` inferred from the first input."""


class LazyConv3d(lazy_layer(Conv3d, _in_channels)):
    """Conv3d with ``in_channels`` inferred from the first input."""


class LazyConvTranspose1d(lazy_layer(ConvTranspose1d, _in_channels)):
    """ConvTranspose1d with ``in_channels`` inferred from the first input."""


class LazyConvTranspose2d(lazy_layer(ConvTranspose2d, _in_channels)):
    """ConvTranspose2d with ``in_channels`` inferred from the first input."""


class LazyConvTranspose3d(lazy_layer(ConvTranspose3d, _in_channels)):
    """ConvTranspose3d with ``in_channels`` inferred from the first input."""
