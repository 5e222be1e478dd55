"""``f32chip``: a worked LeZero backend for a float32-only accelerator.

Many accelerators have no float64 units, and their runtimes refuse a float64 buffer
rather than emulate it.  This chip does the same, on the memory of LeZero's strict device
(so it also behaves as a GPU does: no implicit route to the host, counted transfers):

* ``F32Array``: the chip's array.  Making one of float64 or complex128 -- an upload, or
  any operation whose result would be one -- raises ``TypeError`` naming the chip;
* ``F32Generator``: its random numbers are drawn as float32 (the chip's default float);
* ``F32Chip``: the ``Backend`` (a ``StrictBackend`` given the three classes above), found
  by LeZero through the entry point ``lezero.backends: f32chip`` in pyproject.toml.

    pip install -e examples/backend_plugin
    LEZERO_BACKEND=f32chip pytest --pyargs lezero.testing.conformance
"""
import numpy as np

from lezero.backends import Capabilities
from lezero.backends.strict import StrictArray, StrictBackend
from lezero.backends.strict.rng import Generator

__all__ = ["F32Chip", "F32Array", "F32Generator", "NAME", "DTYPES"]

NAME = "f32chip"
#: what the chip holds: no float64, no complex128
DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "complex64")
_REFUSED = frozenset({np.dtype(np.float64), np.dtype(np.complex128)})


class F32Array(StrictArray):
    """An array in the chip's memory; float64 and complex128 are refused at creation."""

    __slots__ = ()

    def __init__(self, array):
        if array.dtype in _REFUSED:
            raise TypeError(f"{NAME}: the device has no {array.dtype} (float32-only "
                            "accelerator); cast to float32 before it reaches the device")
        super().__init__(array)


class F32Generator(Generator):
    """The chip's generator: CuPy's method set, floating draws made as float32."""

    kind = F32Array

    def _result(self, x):
        x = np.asarray(x)
        return x.astype(np.float32) if x.dtype == np.float64 else x


class F32Chip(StrictBackend):
    """The ``f32chip`` backend: float32-only arrays on strict memory."""

    def __init__(self):
        super().__init__(NAME, kind=F32Array, generator=F32Generator,
                         capabilities=Capabilities(dtypes=DTYPES, default_float="float32",
                                                   float16=True))
