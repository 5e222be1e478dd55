"""Linear layers: Identity, Linear, LazyLinear, Bilinear, Flatten, Unflatten."""
import math

import lezero.functions as F
from lezero.nn import init
from lezero.nn.layers._utils import lazy_layer, reset_fan_in_uniform, weight_and_bias
from lezero.nn.module import Module
from lezero.utils.checks import check_positive_ints


class Identity(Module):
    """Returns its input unchanged (a placeholder in model definitions)."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, x):
        return x


class Linear(Module):
    """y = x W^T + b with ``weight`` (out_features, in_features), as ``torch.nn.Linear``."""

    def __init__(self, in_features, out_features, bias=True):
        super().__init__()
        check_positive_ints(type(self).__name__, in_features=in_features,
                            out_features=out_features)
        self.in_features, self.out_features = in_features, out_features
        weight_and_bias(self, (out_features, in_features), out_features, bias)
        self.reset_parameters()

    def reset_parameters(self):
        reset_fan_in_uniform(self.weight, self.bias)

    def forward(self, x):
        if x.shape[-1] != self.in_features:
            raise ValueError(f"{type(self).__name__}: expected input with {self.in_features} "
                             f"features in the last dim, got shape {x.shape}")
        return F.linear(x, self.weight, self.bias)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


def _in_features(layer, x):
    """A lazy Linear's ``in_features``: the size of the input's last axis."""
    if x.ndim < 1:
        raise ValueError(f"{type(layer).__name__}: expected input of shape (*, in_features), "
                         f"got a 0-d input")
    return x.shape[-1]


class LazyLinear(lazy_layer(Linear, _in_features)):
    """A Linear whose ``in_features`` is inferred from the first input (DeZero's default),
    as ``torch.nn.LazyLinear``."""


class Bilinear(Module):
    """y = x1^T A x2 + b with ``weight`` (out, in1, in2), as ``torch.nn.Bilinear``."""

    def __init__(self, in1_features, in2_features, out_features, bias=True):
        super().__init__()
        check_positive_ints("Bilinear", in1_features=in1_features, in2_features=in2_features,
                            out_features=out_features)
        self.in1_features, self.in2_features = in1_features, in2_features
        self.out_features = out_features
        weight_and_bias(self, (out_features, in1_features, in2_features), out_features, bias)
        self.reset_parameters()

    def reset_parameters(self):
        # PyTorch's: U(-1/sqrt(in1), 1/sqrt(in1)) for the weight and the bias alike.
        bound = 1 / math.sqrt(self.in1_features)
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, x1, x2):
        if x1.shape[-1] != self.in1_features or x2.shape[-1] != self.in2_features \
                or x1.shape[:-1] != x2.shape[:-1]:
            raise ValueError(f"Bilinear: expected inputs (*, {self.in1_features}) and (*, "
                             f"{self.in2_features}) with the same leading dims, got shapes "
                             f"{x1.shape} and {x2.shape}")
        return F.bilinear(x1, x2, self.weight, self.bias)

    def extra_repr(self):
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")


class Flatten(Module):
    """Flatten axes ``start_dim``..``end_dim`` (default: all but the batch axis)."""

    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, x):
        return F.flatten(x, self.start_dim, self.end_dim)


class Unflatten(Module):
    """Expand axis ``dim`` into ``unflattened_size``."""

    def __init__(self, dim, unflattened_size):
        super().__init__()
        self.dim, self.unflattened_size = dim, tuple(unflattened_size)

    def forward(self, x):
        dim = self.dim % x.ndim
        size = math.prod(self.unflattened_size)
        if -1 not in self.unflattened_size and size != x.shape[dim]:
            raise ValueError(f"Unflatten: cannot unflatten dim {self.dim} of size "
                             f"{x.shape[dim]} into {self.unflattened_size} (input shape "
                             f"{x.shape})")
        return F.reshape(x, x.shape[:dim] + self.unflattened_size + x.shape[dim + 1:])
