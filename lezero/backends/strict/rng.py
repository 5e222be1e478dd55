"""The strict device's random numbers: CuPy's ``Generator`` method set, no more.

``cupy.random.Generator`` (CuPy 13) has fewer methods than NumPy's: no ``normal``,
``uniform``, ``choice``, ``permutation`` or ``shuffle``.  Code that calls one of those on a
device generator breaks on a GPU; here it raises AttributeError naming the method.  The
draws come from a NumPy generator, so a seed reproduces them.
"""
import types

import numpy as np

from lezero.backends.cupy_backend import GENERATOR_METHODS   # CuPy's, imports no CuPy
from lezero.backends.strict.array import StrictArray, wrap

__all__ = ["Generator", "GENERATOR_METHODS", "default_rng", "random_namespace"]


# cupy.random's legacy module-level functions (RandomState's).
_LEGACY = ("rand", "randn", "randint", "random", "random_sample", "normal", "uniform",
           "standard_normal", "permutation", "shuffle", "choice", "seed", "exponential",
           "binomial", "poisson", "beta", "gamma")


class Generator:
    """A device generator with CuPy's methods; ``state`` is its bit generator's state."""

    kind = StrictArray              # the class of the arrays it returns

    def __init__(self, seed=None):
        self._rng = np.random.default_rng(seed)

    def __getattr__(self, name):
        if name not in GENERATOR_METHODS:
            raise AttributeError(f"strict device: cupy.random.Generator has no method "
                                 f"{name!r} (it has: {', '.join(sorted(GENERATOR_METHODS))})")
        method = getattr(self._rng, name)

        def draw(*args, **kwargs):
            out = kwargs.get("out")
            if out is not None:
                kwargs["out"] = out._a
            result = method(*args, **kwargs)
            return out if out is not None else _device(self._result(result), self.kind)
        return draw

    def _result(self, x):
        """A draw as the device holds it (a subclass may cast it)."""
        return x

    @property
    def state(self):
        return self._rng.bit_generator.state

    @state.setter
    def state(self, value):
        self._rng.bit_generator.state = value


def _device(x, kind=StrictArray):
    if isinstance(x, (np.ndarray, np.generic)):
        return wrap(np.asarray(x), kind)
    return kind(np.asarray(x))              # CuPy returns 0-d arrays, never Python numbers


def default_rng(seed=None):
    """``cupy.random.default_rng``."""
    return Generator(seed)


def _legacy(name, kind):
    fn = getattr(np.random, name)

    def call(*args, **kwargs):
        args = tuple(a._a if isinstance(a, StrictArray) else a for a in args)
        result = fn(*args, **kwargs)
        return None if result is None else _device(result, kind)
    call.__name__ = name
    return call


def random_namespace(kind=StrictArray, generator=None):
    """``xp.random`` of the strict device (or of a device whose arrays are ``kind`` and
    whose generator class is ``generator``)."""
    module = types.ModuleType("strict.random")
    module.Generator = generator or Generator
    module.default_rng = module.Generator
    for name in _LEGACY:
        setattr(module, name, _legacy(name, kind))
    return module
