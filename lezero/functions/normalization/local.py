"""Compositions: local_response_norm (a window sum across channels) and normalize
(division by a p-norm), with ``torch.nn.functional``'s arguments."""
from lezero.core import Function
from lezero.functions.common import as_variable, xp_of
from lezero.functions.math import clip
from lezero.functions.normalization.checks import check_input
from lezero.functions.reduction import norm
from lezero.functions.registry import register
from lezero.utils.checks import check_axis, check_int, check_number

__all__ = ["local_response_norm", "normalize"]


class ChannelWindowSum(Function):
    """out[:, c] = sum of x[:, c - before : c + after + 1] (zeros beyond the edges)."""

    def __init__(self, before, after):
        self.before = before
        self.after = after

    def forward(self, x):
        xp = xp_of(x)
        n_ch = x.shape[1]
        # a window wider than the channels sums the same zeros: pad at most n_ch a side
        # (size=10**9 would otherwise allocate 10**9 channels of padding)
        before, after = min(self.before, n_ch), min(self.after, n_ch)
        pad = [(0, 0)] * x.ndim
        pad[1] = (before + 1, after)                # +1: a zero in front of the cumsum
        cs = xp.cumsum(xp.pad(x, pad), axis=1)
        size = before + after + 1
        return cs[:, size:size + n_ch] - cs[:, :n_ch]

    def backward(self, gy):
        # The adjoint of a window sum is the window sum with the sides swapped.
        return ChannelWindowSum(self.after, self.before)(gy)


@register("normalization")
def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    """Local response normalization across channels, as
    ``torch.nn.functional.local_response_norm``:
    ``x / (k + alpha / size * sum of x**2 over size neighbouring channels) ** beta``."""
    op = "local_response_norm"
    check_input(op, input, 3, "(N, C, *spatial) with at least 3 dims")
    if check_int(op, "size", size) < 1:
        raise ValueError(f"{op}: size must be positive, got {size}")
    alpha = check_number(op, "alpha", alpha)
    beta = check_number(op, "beta", beta)
    k = check_number(op, "k", k)
    x = as_variable(input)
    window = ChannelWindowSum(size // 2, (size - 1) // 2)(x * x)
    return x / (window * (alpha / size) + k) ** beta


@register("normalization")
def normalize(input, p=2.0, axis=1, eps=1e-12):
    """``input / max(||input||_p, eps)`` along ``axis``, as
    ``torch.nn.functional.normalize`` (with ``axis`` for PyTorch's ``dim``)."""
    op = "normalize"
    x = check_input(op, input, 1, "at least 1-D")
    axis = check_axis(op, axis, x.ndim)
    p = check_number(op, "p", p, 0.0, low_open=True)
    eps = check_number(op, "eps", eps, 0.0)
    x = as_variable(input)
    return x / clip(norm(x, p, axis, keepdims=True), eps)
