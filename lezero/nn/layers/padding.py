"""Padding layers with PyTorch's names, arguments and semantics, built on ``F.pad``.

``padding`` is an int (the same on every side) or PyTorch's flat tuple, last dim first:
``(left, right)``, ``(left, right, top, bottom)``, ``(left, right, top, bottom, front,
back)``.  ``F.pad`` takes NumPy's per-axis ``((before, after), ...)``, first axis first, so
the layers reverse the pairs.  Negative padding crops, as in PyTorch: the positive sides
are padded first, then the negative ones are sliced off -- except for circular padding,
which (as PyTorch) crops first and then wraps the cropped input around.

Accepted ranks are PyTorch's: the constant (and zero) pads take any input with at least
the padded dims; reflection, replication and circular pads take an unbatched (C, *) or a
batched (N, C, *) input.  Reflection needs each pad smaller than the dim it pads, circular
at most that dim (PyTorch's limits; NumPy would keep reflecting or wrapping instead).
"""

import lezero.functions as F
from lezero.nn.layers._utils import named_errors
from lezero.nn.module import Module
from lezero.utils.checks import check_number, is_int

# How an error describes the unbatched and batched inputs of an n-d non-constant pad.
_LAYOUTS = {1: ("(C, W)", "(N, C, W)"), 2: ("(C, H, W)", "(N, C, H, W)"),
            3: ("(C, D, H, W)", "(N, C, D, H, W)")}


def _padding_tuple(layer, padding, n):
    """An int, or a tuple/list of 2n ints in PyTorch's order, as a tuple of 2n ints."""
    if is_int(padding):
        return (int(padding),) * (2 * n)
    if not isinstance(padding, (tuple, list)) or not all(is_int(v) for v in padding):
        raise TypeError(f"{layer}: padding must be an int or a tuple of {2 * n} ints, got "
                        f"{padding!r}")
    if len(padding) != 2 * n:
        raise ValueError(f"{layer}: padding must be an int or a tuple of {2 * n} ints, got "
                         f"{len(padding)} values {tuple(padding)!r}")
    return tuple(int(v) for v in padding)


def _crop(x, pairs):
    """Slice off the negative (before, after) amounts of ``pairs`` (one pair per axis)."""
    if all(b >= 0 and a >= 0 for b, a in pairs):
        return x
    return x[tuple(slice(max(-b, 0), size - max(-a, 0)) for (b, a), size in zip(pairs, x.shape))]


class _PadNd(Module):
    """Pad the last ``n`` dims of the input by ``self.padding`` in ``mode`` (an F.pad mode)."""

    n = 1
    mode = "constant"
    crop_first = False        # crop the negative sides before padding (else after)

    def __init__(self, padding):
        super().__init__()
        self.padding = _padding_tuple(type(self).__name__, padding, self.n)

    def _pairs(self):
        """(before, after) for each of the last n dims, first of them first."""
        p = self.padding
        return [(p[2 * k], p[2 * k + 1]) for k in reversed(range(self.n))]

    def _check_input(self, x):
        """Raise ValueError for an input of a rank (or, per mode, size) PyTorch refuses."""

    def _pad_options(self):
        return {}

    def forward(self, input):
        self._check_input(input)
        pairs = [(0, 0)] * (input.ndim - self.n) + self._pairs()
        x = _crop(input, pairs) if self.crop_first else input
        with named_errors(type(self).__name__):
            y = F.pad(x, [(max(b, 0), max(a, 0)) for b, a in pairs], mode=self.mode,
                      **self._pad_options())
        return y if self.crop_first else _crop(y, pairs)

    def extra_repr(self):
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    """Pad with a constant ``value``; any input with at least ``n`` dims."""

    def __init__(self, padding, value):
        super().__init__(padding)
        self.value = check_number(type(self).__name__, "value", value)

    def _check_input(self, x):
        if x.ndim < self.n:
            raise ValueError(f"{type(self).__name__}: expected an input with at least "
                             f"{self.n} dims to pad, got shape {x.shape}")

    def _pad_options(self):
        return {"constant_values": self.value}

    def extra_repr(self):
        return f"padding={self.padding}, value={self.value}"


class _ZeroPadNd(_ConstantPadNd):
    """Pad with zeros."""

    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return f"{self.padding}"


class _CopyPadNd(_PadNd):
    """Pad by copying input elements (reflect, replicate, circular): (C, *) or (N, C, *)
    input, with each padded dim non-empty and, for reflect and circular, large enough."""

    _limit = "the padded dims must be non-empty"      # said when a pad does not fit

    def _fits(self, pad, size):
        return size > 0

    def _check_input(self, x):
        name = type(self).__name__
        if x.ndim not in (self.n + 1, self.n + 2):
            unbatched, batched = _LAYOUTS[self.n]
            raise ValueError(f"{name}: expected a {self.n + 1}-D {unbatched} or "
                             f"{self.n + 2}-D {batched} input, got shape {x.shape}")
        sizes = x.shape[x.ndim - self.n:]
        for axis, (pair, size) in enumerate(zip(self._pairs(), sizes), x.ndim - self.n):
            if self.crop_first:                 # the pads wrap what is left after cropping
                size -= sum(max(-pad, 0) for pad in pair)
            if any(pad > 0 and not self._fits(pad, size) for pad in pair):
                raise ValueError(f"{name}: padding {pair} does not fit dim {axis} of size "
                                 f"{size} (input shape {x.shape}); {self._limit}")


class _ReflectionPadNd(_CopyPadNd):
    """Mirror the input at its edges, without repeating the edge element."""

    mode = "reflect"
    _limit = "reflection padding must be smaller than the dim it pads"

    def _fits(self, pad, size):
        return pad < size


class _ReplicationPadNd(_CopyPadNd):
    """Repeat the edge element."""

    mode = "replicate"


class _CircularPadNd(_CopyPadNd):
    """Wrap around: pad with the elements from the other end."""

    mode = "circular"
    crop_first = True
    _limit = "circular padding may wrap around at most once (pad <= size after cropping)"

    def _fits(self, pad, size):
        return 0 < size and pad <= size


# PyTorch's padding tuple for n padded dims.
_ORDER = {1: "(left, right)", 2: "(left, right, top, bottom)",
          3: "(left, right, top, bottom, front, back)"}


def _layers(base, what):
    """PyTorch's 1d, 2d and 3d classes of ``base`` (``_ReflectionPadNd`` gives
    ``ReflectionPad1d``, ``ReflectionPad2d``, ``ReflectionPad3d``), documented as ``what``
    with the inputs and the padding each takes."""
    stem = base.__name__.strip("_")[:-2]
    classes = []
    for n in (1, 2, 3):
        name = f"{stem}{n}d"
        inputs = (" or ".join(_LAYOUTS[n]) if issubclass(base, _CopyPadNd)
                  else f"an input of {n}-D or more")
        dims = "dim" if n == 1 else f"{n} dims"
        doc = (f"{what} of the last {dims} of {inputs}; ``padding`` is an int or "
               f"{_ORDER[n]}.  As ``torch.nn.{name}``.")
        classes.append(type(name, (base,), {"n": n, "__doc__": doc, "__module__": __name__,
                                             "__qualname__": name}))
    return classes


ConstantPad1d, ConstantPad2d, ConstantPad3d = _layers(_ConstantPadNd, "Constant (``value``) "
                                                                      "padding")
ZeroPad1d, ZeroPad2d, ZeroPad3d = _layers(_ZeroPadNd, "Zero padding")
ReflectionPad1d, ReflectionPad2d, ReflectionPad3d = _layers(_ReflectionPadNd,
                                                            "Reflection padding")
ReplicationPad1d, ReplicationPad2d, ReplicationPad3d = _layers(_ReplicationPadNd,
                                                               "Edge-replicating padding")
CircularPad1d, CircularPad2d, CircularPad3d = _layers(_CircularPadNd,
                                                      "Circular (wrap-around) padding")
