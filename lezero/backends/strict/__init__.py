"""The ``strict`` backend: a device stand-in on NumPy memory that behaves as CuPy does
where NumPy does not (see ``array.py``), so the GPU code paths run -- and their hidden host
round trips show -- on any CPU.  ``counters`` counts synchronizations, transfers and the
bytes of its memory pool.
"""
import numpy as np

from lezero.backends.base import Backend, Capabilities
from lezero.backends.strict import counters
from lezero.backends.strict.array import CURRENT, StrictArray
from lezero.backends.strict.rng import GENERATOR_METHODS, Generator
from lezero.backends.strict.xp import make_namespace, namespace, special_namespace

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
        CURRENT.append(self.id)
        return self

    def __exit__(self, *exc):
        CURRENT.pop()

    def synchronize(self):
        counters.record(sync=1, what="synchronize()")


def current_device():
    return StrictDevice(CURRENT[-1])


class StrictBackend(Backend):
    """Arrays: ``StrictArray``; namespace: ``namespace`` (``lezero.backends.strict.xp``).

    Another device can be built on strict memory by passing its own ``name``, array class
    ``kind`` (a ``StrictArray`` subclass: results of operations keep it), ``generator``
    class and ``capabilities`` (examples/backend_plugin: a float32-only chip)."""

    rng_methods = GENERATOR_METHODS

    def __init__(self, name="strict", kind=StrictArray, generator=Generator,
                 capabilities=None):
        xp = namespace if kind is StrictArray else make_namespace(name, kind, generator)
        super().__init__(name, xp, (kind,), capabilities or Capabilities(float16=True))
        self.kind, self.generator = kind, generator

    def from_host(self, array, device=None):
        if type(array) is self.kind:
            return array
        counters.record(h2d=1, what="from_host")
        if device is None:
            return self.kind(np.array(array, copy=True, subok=False))
        with StrictDevice(device):
            return self.kind(np.array(array, copy=True, subok=False))

    def to_host(self, array):
        return array.get()

    def device_of(self, array):
        return f"{self.name}:{array.device.id}"

    def device(self, index=0):
        return StrictDevice(index)

    def scatter_add(self, target, index, values):
        self.xp.add.at(target, index, values)
        return target

    def rng(self, seed=None):
        return self.generator(seed)

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
