"""The ``strict`` backend: a device stand-in on NumPy memory that behaves as CuPy does
where NumPy does not (see ``array.py``), so the GPU code paths run -- and their hidden host
round trips show -- on any CPU.  ``counters`` counts synchronizations, transfers and the
bytes of its memory pool.
"""
import numpy as np

from lezero.backends.base import Backend, Capabilities
from lezero.backends.strict import counters
from lezero.backends.strict.array import StrictArray
from lezero.backends.strict.rng import GENERATOR_METHODS, Generator
from lezero.backends.strict.xp import namespace, special_namespace

__all__ = ["StrictBackend", "StrictArray", "StrictDevice", "counters", "namespace",
           "current_device"]


class StrictDevice:
    """``array.device``: the id of a strict device, usable as a context (as CuPy's)."""

    def __init__(self, id):
        self.id = id

    def __repr__(self):
        return f"<strict device {self.id}>"

    def __eq__(self, other):
        return isinstance(other, StrictDevice) and other.id == self.id

    def __hash__(self):
        return hash(("strict", self.id))

    def __enter__(self):
        _current.append(self.id)
        return self

    def __exit__(self, *exc):
        _current.pop()

    def synchronize(self):
        counters.record(sync=1, what="synchronize()")


_current = [0]


def current_device():
    return StrictDevice(_current[-1])


class StrictBackend(Backend):
    """Arrays: ``StrictArray``; namespace: ``namespace`` (``lezero.backends.strict.xp``)."""

    rng_methods = GENERATOR_METHODS

    def __init__(self):
        super().__init__("strict", namespace, (StrictArray,), Capabilities(float16=True))

    def from_host(self, array, device=None):
        if type(array) is StrictArray:
            return array
        counters.record(h2d=1, what="from_host")
        return StrictArray(np.array(array, copy=True, subok=False))

    def to_host(self, array):
        return array.get()

    def device_of(self, array):
        return f"strict:{array.device.id}"

    def device(self, index=0):
        return StrictDevice(index)

    def scatter_add(self, target, index, values):
        namespace.add.at(target, index, values)
        return target

    def rng(self, seed=None):
        return Generator(seed)

    @property
    def special(self):
        """scipy.special over device arrays (its functions are ufuncs, as on CuPy)."""
        return special_namespace()

    def count_transfers(self):
        return counters.count(trace=True)

    def synchronize(self):
        counters.record(sync=1, what="synchronize()")

    def memory_stats(self):
        return counters.pool.stats()
