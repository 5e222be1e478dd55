"""Normalization layers: BatchNorm, InstanceNorm (and their lazy versions), LayerNorm,
GroupNorm, RMSNorm, LRN.

Parameter and buffer names, shapes, order and initial values are PyTorch's (``weight``
ones, ``bias`` zeros, ``running_mean`` zeros, ``running_var`` ones, ``num_batches_tracked``
an int64 scalar), so a PyTorch ``state_dict`` loads as it is.  The running statistics are
plain arrays registered as buffers; ``F.batch_norm`` and ``F.instance_norm`` update them in
place, so the module only chooses the momentum and counts batches.
"""
import numpy as np

import lezero.functions as F
from lezero.nn.layers._utils import empty_parameter, lazy_layer, named_errors
from lezero.nn.module import Module
from lezero.utils.checks import check_bools, check_int_or_tuple, check_number, check_positive_ints


def _affine_parameters(module, shape, weight, bias):
    """Register ``weight`` (ones) and ``bias`` (zeros) of ``shape``, or None for each;
    ``bias=None`` declares no bias at all (RMSNorm)."""
    module.register_parameter("weight", empty_parameter(*shape) if weight else None)
    if bias is not None:
        module.register_parameter("bias", empty_parameter(*shape) if bias else None)


def _reset_affine(module):
    if module.weight is not None:
        module.weight.data[...] = 1
    if getattr(module, "bias", None) is not None:
        module.bias.data[...] = 0


class _NormBase(Module):
    """The shared state of batch and instance norm: per-channel ``weight``/``bias`` (with
    ``affine``) and running statistics (with ``track_running_stats``)."""

    ndims = ()          # accepted input ranks
    shape_text = ""     # how to describe them in an error

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, *, bias=True):
        super().__init__()
        name = type(self).__name__
        check_positive_ints(name, num_features=num_features)
        check_bools(name, affine=affine, track_running_stats=track_running_stats, bias=bias)
        self.num_features = num_features
        self.eps = check_number(name, "eps", eps, 0.0)
        self.momentum = None if momentum is None else check_number(name, "momentum", momentum,
                                                                   0.0, 1.0)
        self.affine, self.track_running_stats = affine, track_running_stats
        _affine_parameters(self, (num_features,), affine, affine and bias)
        if track_running_stats:
            self.register_buffer("running_mean", np.zeros(num_features, np.float32))
            self.register_buffer("running_var", np.ones(num_features, np.float32))
            self.register_buffer("num_batches_tracked", np.zeros((), np.int64))
        else:
            for buffer in ("running_mean", "running_var", "num_batches_tracked"):
                self.register_buffer(buffer, None)
        self.reset_parameters()

    def reset_running_stats(self):
        if self.track_running_stats:
            self.running_mean[...] = 0
            self.running_var[...] = 1
            self.num_batches_tracked[...] = 0

    def reset_parameters(self):
        self.reset_running_stats()
        _reset_affine(self)

    def _channel_axis(self, x):
        return 1

    def _check_rank(self, x):
        if x.ndim not in self.ndims:
            raise ValueError(f"{type(self).__name__}: expected {self.shape_text} input, got "
                             f"shape {x.shape}")

    def _check_input(self, x):
        self._check_rank(x)
        if x.shape[self._channel_axis(x)] != self.num_features:
            raise ValueError(f"{type(self).__name__}: expected {self.num_features} channels, "
                             f"got input shape {x.shape}")

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, bias={self.bias is not None}, "
                f"track_running_stats={self.track_running_stats}")


class BatchNormBase(_NormBase):
    """What BatchNorm1d/2d/3d (and parallel.SyncBatchNorm) share: batch statistics in
    training, running statistics in evaluation."""

    def forward(self, input):
        self._check_input(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            self.num_batches_tracked += 1
            if self.momentum is None:      # a cumulative moving average, as in PyTorch
                factor = 1.0 / float(self.num_batches_tracked)
        # Batch statistics in training, and also in evaluation when none were tracked.
        use_batch = self.training or self.running_mean is None
        track = not self.training or self.track_running_stats
        with named_errors(type(self).__name__):
            return F.batch_norm(input, self.running_mean if track else None,
                                self.running_var if track else None, self.weight, self.bias,
                                use_batch, factor, self.eps)


class BatchNorm1d(BatchNormBase):
    """Batch normalization of (N, C) or (N, C, L), as ``torch.nn.BatchNorm1d``."""

    ndims, shape_text = (2, 3), "(N, C) or (N, C, L)"


class BatchNorm2d(BatchNormBase):
    """Batch normalization of (N, C, H, W), as ``torch.nn.BatchNorm2d``."""

    ndims, shape_text = (4,), "(N, C, H, W)"


class BatchNorm3d(BatchNormBase):
    """Batch normalization of (N, C, D, H, W), as ``torch.nn.BatchNorm3d``."""

    ndims, shape_text = (5,), "(N, C, D, H, W)"


class _InstanceNorm(_NormBase):
    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=False,
                 track_running_stats=False, *, bias=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, bias=bias)

    def _channel_axis(self, x):
        return 0 if x.ndim == min(self.ndims) else 1

    def _check_input(self, x):
        # PyTorch lets a parameter-free instance norm take any channel count.
        if self.affine or self.track_running_stats or x.ndim not in self.ndims:
            super()._check_input(x)

    def forward(self, input):
        self._check_input(input)
        unbatched = input.ndim == min(self.ndims)
        x = F.expand_dims(input, 0) if unbatched else input
        use_input_stats = self.training or not self.track_running_stats
        momentum = 0.0 if self.momentum is None else self.momentum
        with named_errors(type(self).__name__):
            y = F.instance_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                                use_input_stats, momentum, self.eps)
        return F.squeeze(y, 0) if unbatched else y


class InstanceNorm1d(_InstanceNorm):
    """Instance normalization of (N, C, L) or (C, L), as ``torch.nn.InstanceNorm1d``."""

    ndims, shape_text = (2, 3), "(N, C, L) or (C, L)"


class InstanceNorm2d(_InstanceNorm):
    """Instance normalization of (N, C, H, W) or (C, H, W), as ``torch.nn.InstanceNorm2d``."""

    ndims, shape_text = (3, 4), "(N, C, H, W) or (C, H, W)"


class InstanceNorm3d(_InstanceNorm):
    """Instance normalization of (N, C, D, H, W) or (C, D, H, W), as
    ``torch.nn.InstanceNorm3d``."""

    ndims, shape_text = (4, 5), "(N, C, D, H, W) or (C, D, H, W)"


def _num_features(layer, x):
    """A lazy batch or instance norm's ``num_features``: the size of the channel axis."""
    layer._check_rank(x)
    return x.shape[layer._channel_axis(x)]


class LazyBatchNorm1d(lazy_layer(BatchNorm1d, _num_features)):
    """BatchNorm1d with ``num_features`` inferred from the first input."""


class LazyBatchNorm2d(lazy_layer(BatchNorm2d, _num_features)):
    """BatchNorm2d with ``num_features`` inferred from the first input."""


class LazyBatchNorm3d(lazy_layer(BatchNorm3d, _num_features)):
    """BatchNorm3d with ``num_features`` inferred from the first input."""


# PyTorch's lazy instance norms default to affine=True and track_running_stats=True (the
# eager ones to False): a lazy layer without parameters or statistics would infer nothing.
_LAZY_INSTANCE_DEFAULTS = dict(affine=True, track_running_stats=True)


class LazyInstanceNorm1d(lazy_layer(InstanceNorm1d, _num_features, **_LAZY_INSTANCE_DEFAULTS)):
    """InstanceNorm1d with ``num_features`` inferred from the first input."""


class LazyInstanceNorm2d(lazy_layer(InstanceNorm2d, _num_features, **_LAZY_INSTANCE_DEFAULTS)):
    """InstanceNorm2d with ``num_features`` inferred from the first input."""


class LazyInstanceNorm3d(lazy_layer(InstanceNorm3d, _num_features, **_LAZY_INSTANCE_DEFAULTS)):
    """InstanceNorm3d with ``num_features`` inferred from the first input."""


class _ShapeNorm(Module):
    """Normalization over the trailing ``normalized_shape`` dims (LayerNorm, RMSNorm)."""

    def __init__(self, normalized_shape, eps, elementwise_affine, bias):
        super().__init__()
        name = type(self).__name__
        shape = check_int_or_tuple(name, "normalized_shape", normalized_shape)
        shape = (shape,) if isinstance(shape, int) else shape
        if not shape or any(s <= 0 for s in shape):
            raise ValueError(f"{name}: normalized_shape must be a positive int or a non-empty "
                             f"tuple of them, got {normalized_shape!r}")
        check_bools(name, elementwise_affine=elementwise_affine)
        if bias is not None:
            check_bools(name, bias=bias)
        self.normalized_shape = tuple(int(s) for s in shape)
        self.eps = None if eps is None else check_number(name, "eps", eps, 0.0)
        self.elementwise_affine = elementwise_affine
        _affine_parameters(self, self.normalized_shape, elementwise_affine,
                           None if bias is None else elementwise_affine and bias)
        self.reset_parameters()

    def reset_parameters(self):
        _reset_affine(self)

    def _check_input(self, x):
        n = len(self.normalized_shape)
        if x.shape[x.ndim - n:] != self.normalized_shape or x.ndim < n:
            raise ValueError(f"{type(self).__name__}: expected input whose trailing dims are "
                             f"{self.normalized_shape}, got shape {x.shape}")

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")


class LayerNorm(_ShapeNorm):
    """Normalise over the trailing ``normalized_shape`` dims, then scale by ``weight`` and
    shift by ``bias`` (each of that shape), as ``torch.nn.LayerNorm``."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True):
        super().__init__(normalized_shape, eps, elementwise_affine, bias)

    def forward(self, input):
        self._check_input(input)
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return f"{super().extra_repr()}, bias={self.bias is not None}"


class RMSNorm(_ShapeNorm):
    """x / sqrt(mean(x**2) + eps) * weight over the trailing dims (``eps=None``: the
    dtype's machine epsilon), as ``torch.nn.RMSNorm``."""

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True):
        super().__init__(normalized_shape, eps, elementwise_affine, None)

    def forward(self, input):
        self._check_input(input)
        return F.rms_norm(input, self.normalized_shape, self.weight, self.eps)


class GroupNorm(Module):
    """Normalise each of ``num_groups`` channel groups of (N, C, *) over its channels and
    positions, then apply per-channel ``weight``/``bias``, as ``torch.nn.GroupNorm``."""

    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, *, bias=True):
        super().__init__()
        check_positive_ints("GroupNorm", num_groups=num_groups, num_channels=num_channels)
        if num_channels % num_groups:
            raise ValueError(f"GroupNorm: num_channels ({num_channels}) must be divisible by "
                             f"num_groups ({num_groups})")
        check_bools("GroupNorm", affine=affine, bias=bias)
        self.num_groups, self.num_channels, self.affine = num_groups, num_channels, affine
        self.eps = check_number("GroupNorm", "eps", eps, 0.0)
        _affine_parameters(self, (num_channels,), affine, affine and bias)
        self.reset_parameters()

    def reset_parameters(self):
        _reset_affine(self)

    def forward(self, input):
        if input.ndim < 2 or input.shape[1] != self.num_channels:
            raise ValueError(f"GroupNorm: expected (N, {self.num_channels}, *) input, got "
                             f"shape {input.shape}")
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
                f"bias={self.bias is not None}")


class LocalResponseNorm(Module):
    """Divide by a power of the local sum of squares across ``size`` neighbouring channels,
    as ``torch.nn.LocalResponseNorm`` (no parameters)."""

    def __init__(self, size, alpha=1e-4, beta=0.75, k=1.0):
        super().__init__()
        check_positive_ints("LocalResponseNorm", size=size)
        self.size = size
        self.alpha = check_number("LocalResponseNorm", "alpha", alpha)
        self.beta = check_number("LocalResponseNorm", "beta", beta)
        self.k = check_number("LocalResponseNorm", "k", k)

    def forward(self, input):
        if input.ndim < 3:
            raise ValueError(f"LocalResponseNorm: expected (N, C, *) input with at least one "
                             f"spatial dim, got shape {input.shape}")
        return F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self):
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"
