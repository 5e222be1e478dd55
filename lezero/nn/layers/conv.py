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
        self.kernel_size = ntuple(name, "kernel_size", kernel_size, self.n)
        self.stride = ntuple(name, "stride", stride, self.n)
        self.dilation = ntuple(name, "dilation", dilation, self.n)
        takes_string = isinstance(padding, str) and not self.transposed   # "same", "valid"
        self.padding = padding if takes_string else ntuple(name, "padding", padding, self.n)
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
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        if self.padding not in ((0,) * self.n, "valid"):
            s += f", padding={self.padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode!r}"
        return s + ("" if self.bias is not None else ", bias=False")


def _conv_layer(n, fn):
    class Conv(_ConvNd):
        def forward(self, x):
            self._check_input(x)
            x, padding = self._pad_explicitly(x)
            return fn(x, self.weight, self.bias, self.stride, padding, self.dilation,
                      self.groups)
    Conv.n = n
    return Conv


def _conv_transpose_layer(n, fn):
    class ConvTranspose(_ConvNd):
        transposed = True

        def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                     output_padding=0, groups=1, bias=True, dilation=1, padding_mode="zeros"):
            # PyTorch's positional order for transposed convolutions differs from Conv's.
            super().__init__(in_channels, out_channels, kernel_size, stride=stride,
                             padding=padding, dilation=dilation, groups=groups, bias=bias,
                             padding_mode=padding_mode)
            self.output_padding = ntuple(type(self).__name__, "output_padding",
                                         output_padding, self.n)

        def forward(self, x):
            self._check_input(x)
            return fn(x, self.weight, self.bias, self.stride, self.padding,
                      self.output_padding, self.groups, self.dilation)
    ConvTranspose.n = n
    return ConvTranspose


class Conv1d(_conv_layer(1, F.conv1d)):
    """1-D convolution over (N, C, L), as ``torch.nn.Conv1d``."""


class Conv2d(_conv_layer(2, F.conv2d)):
    """2-D convolution over (N, C, H, W), as ``torch.nn.Conv2d``."""


class Conv3d(_conv_layer(3, F.conv3d)):
    """3-D convolution over (N, C, D, H, W), as ``torch.nn.Conv3d``."""


class ConvTranspose1d(_conv_transpose_layer(1, F.conv_transpose1d)):
    """Transposed 1-D convolution, as ``torch.nn.ConvTranspose1d``."""


class ConvTranspose2d(_conv_transpose_layer(2, F.conv_transpose2d)):
    """Transposed 2-D convolution, as ``torch.nn.ConvTranspose2d``."""


class ConvTranspose3d(_conv_transpose_layer(3, F.conv_transpose3d)):
    """Transposed 3-D convolution over (N, C, D, H, W), as ``torch.nn.ConvTranspose3d``."""


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
