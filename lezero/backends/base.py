"""``Backend``: one array library (a device) and the hooks LeZero needs beyond its ``xp``.

Operators are written against an array namespace ``xp`` (``numpy``, ``cupy``, ...).  A
``Backend`` adds what a namespace does not say: identity (``name``, ``array_types``,
``capabilities``), transfers (``from_host``, ``to_host``, ``device_of``, ``device(i)``),
``scatter_add`` with repeated indices summed, a seeded generator (``rng``) with a declared
method set, ``synchronize``, ``memory_stats`` and ``kernels`` (op name -> a fast
implementation that replaces the reference).

A new chip needs only three hooks: ``array_types``, ``from_host`` and ``to_host``.  Given
no ``xp``, the backend runs every NumPy function on the host -- device arrays to host,
NumPy, results back -- with a warning (once per function) and a count in
``fallback_counts``, so the whole framework runs before a single kernel is written.
"""
import contextlib
import types
import warnings

import numpy as np

__all__ = ["Backend", "Capabilities", "HostFallback", "HostGenerator", "FLOAT_DTYPES",
           "ALL_DTYPES"]

FLOAT_DTYPES = ("float16", "float32", "float64")
ALL_DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
              "uint64") + FLOAT_DTYPES + ("complex64", "complex128")


class Capabilities:
    """What a device holds: ``dtypes`` (names), the ``default_float``, whether float16 is
    computed natively (``float16``) and whether arrays can be written in place."""

    __slots__ = ("dtypes", "default_float", "float16", "writeable")

    def __init__(self, dtypes=ALL_DTYPES, default_float="float32", float16=True,
                 writeable=True):
        self.dtypes, self.default_float = tuple(dtypes), default_float
        self.float16, self.writeable = float16, writeable

    @property
    def widest_float(self):
        """The most precise float the device holds (``'float64'``, or ``'float32'`` on a
        float32-only chip): what an operator that accumulates in float64 on the host
        should use instead (``ctc_loss``'s alignment, ``avg_pool``'s divisor)."""
        return next((f for f in ("float64", "float32", "float16") if f in self.dtypes),
                    self.default_float)

    def __repr__(self):
        return (f"Capabilities(dtypes={self.dtypes}, default_float={self.default_float!r}, "
                f"float16={self.float16}, writeable={self.writeable})")


class Backend:
    """A device: an array namespace and the hooks around it (override what differs)."""

    #: the generator methods ``rng(seed)`` promises (the conformance suite checks them)
    rng_methods = frozenset({"random", "integers", "standard_normal"})
    #: True when arrays are NumPy arrays in host memory: reading a value costs no
    #: synchronization, Numba kernels and pooled host buffers apply, LAPACK raises on
    #: failure.  Operators ask this instead of comparing ``xp`` with ``numpy``.
    is_host = False

    def __init__(self, name, xp=None, array_types=(), capabilities=None, kernels=None):
        self.name = name
        self._array_types = tuple(array_types)
        self.capabilities = capabilities or Capabilities()
        self.kernels = dict(kernels or {})
        self.fallback_counts = {}
        self._xp = xp

    def __repr__(self):
        return f"<lezero backend {self.name!r}>"

    @property
    def xp(self):
        """The array namespace operators use (a host fallback when none was given)."""
        if self._xp is None:
            self._xp = HostFallback(self)
        return self._xp

    @property
    def array_types(self):
        return self._array_types

    def has_namespace(self, xp):
        """True when ``xp`` is this backend's array namespace (imports nothing)."""
        return self._xp is xp

    def is_available(self):
        """True when arrays can be made on this device now."""
        return True

    # ----- transfers -------------------------------------------------------------------
    def from_host(self, array, device=None):
        """A device array holding a NumPy array's values (on device ``device``)."""
        if device is None:
            return self.xp.asarray(array)
        with self.device(device):
            return self.xp.asarray(array)

    def to_host(self, array):
        """A NumPy array holding a device array's values."""
        return np.asarray(array)

    def asarray(self, value, dtype=None, copy=False):
        """``value`` (host data, this device's array or another device's) as an array of
        this backend, of ``dtype`` when given; a new array when ``copy``."""
        if not isinstance(value, self.array_types):
            from lezero.backends.registry import get_backend
            source = get_backend(value)
            value = np.asarray(value if source.is_host else source.to_host(value))
            if dtype is not None and value.dtype != dtype:
                value = value.astype(dtype)
            return self.from_host(value)
        if copy:
            return self.xp.array(value, dtype=dtype)
        return value if dtype is None else value.astype(dtype, copy=False)

    def device_of(self, array):
        """``'<name>:<id>'`` for a device array."""
        return f"{self.name}:0"

    def device(self, index=0):
        """A context in which new arrays land on device ``index``."""
        return contextlib.nullcontext()

    # ----- compute hooks ----------------------------------------------------------------
    def scatter_add(self, target, index, values):
        """``target[index] += values`` in place, repeated indices all adding up."""
        self.xp.add.at(target, index, values)
        return target

    def rng(self, seed=None):
        """A new seeded generator of this device (methods: ``rng_methods``)."""
        if isinstance(self.xp, HostFallback):
            return HostGenerator(self, seed)
        return self.xp.random.default_rng(seed)

    @property
    def special(self):
        """The device's ``scipy.special`` (erf, gammaln, ...): by default SciPy's run on
        the host through ``on_host``."""
        import scipy.special
        return HostFallback(self, scipy.special)

    def synchronize(self):
        """Wait for the work queued on the device."""

    def memory_stats(self):
        """The device memory pool's counts (bytes), {} when the device keeps none."""
        return {}

    def count_transfers(self):
        """A context manager yielding live counts of host round trips (``.syncs``,
        ``.d2h``, ``.h2d``, ``.sites``), or None when the device cannot count them (the
        conformance suite's no-host-escape test then skips)."""
        return None

    def kernel(self, name, reference):
        """The fast implementation of op ``name`` on this device, else ``reference``."""
        return self.kernels.get(name, reference)

    def on_host(self, fn, name=None):
        """``fn`` run on the host: device arguments copied to NumPy, results copied back,
        with a warning the first time and a count in ``fallback_counts``."""
        name = name or getattr(fn, "__name__", repr(fn))

        def run(*args, **kwargs):
            count = self.fallback_counts.get(name, 0)
            if count == 0:
                warnings.warn(f"backend {self.name!r} has no {name}: it runs on the host "
                              "(device -> NumPy -> device)", RuntimeWarning, stacklevel=2)
            self.fallback_counts[name] = count + 1
            result = fn(*self._map(args, self.to_host), **self._map(kwargs, self.to_host))
            return self._map(result, self.from_host, host=True)
        run.__name__ = name
        return run

    def _map(self, x, convert, host=False):
        kind = np.ndarray if host else self.array_types
        if isinstance(x, kind):
            return convert(x)
        if host and isinstance(x, np.generic):
            return convert(np.asarray(x))
        if type(x) in (tuple, list):
            return type(x)(self._map(v, convert, host) for v in x)
        if type(x) is dict:
            return {k: self._map(v, convert, host) for k, v in x.items()}
        return x


class HostFallback(types.ModuleType):
    """The ``xp`` of a backend that brings none: NumPy's names, functions run on the host
    through ``Backend.on_host`` (dtypes, classes and constants are NumPy's own)."""

    def __init__(self, backend, source=np):
        super().__init__(f"{backend.name}.host_fallback")
        self._backend = backend
        self._source = source

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        obj = getattr(self._source, name)
        if isinstance(obj, types.ModuleType):
            value = HostFallback(self._backend, obj)
        elif isinstance(obj, np.ufunc):
            value = _FallbackUfunc(self._backend, obj)
        elif isinstance(obj, type) or not callable(obj):
            value = obj
        else:
            value = self._backend.on_host(obj, name)
        setattr(self, name, value)
        return value


class _FallbackUfunc:
    """A ufunc of the host fallback: the call and its methods (``at``, ``reduce``) run on
    the host; ``at`` writes its result back into the device target."""

    def __init__(self, backend, ufunc):
        self._backend, self._ufunc = backend, ufunc
        self.__name__ = ufunc.__name__
        self._call = backend.on_host(ufunc, ufunc.__name__)

    def __call__(self, *args, **kwargs):
        return self._call(*args, **kwargs)

    def at(self, target, *args):
        host = self._backend.to_host(target)
        self._backend.on_host(lambda t, *a: self._ufunc.at(t, *a),
                              f"{self.__name__}.at")(host, *args)
        target[...] = self._backend.from_host(host)

    def __getattr__(self, name):
        return self._backend.on_host(getattr(self._ufunc, name), f"{self.__name__}.{name}")


class HostGenerator:
    """The generator of a backend without one: NumPy's draws (only ``rng_methods``), each
    copied to the device through ``Backend.on_host``."""

    def __init__(self, backend, seed=None):
        self._backend, self._rng = backend, np.random.default_rng(seed)

    def __getattr__(self, name):
        if name not in self._backend.rng_methods:
            raise AttributeError(f"backend {self._backend.name!r}: its generator has no "
                                 f"{name!r} (rng_methods: {sorted(self._backend.rng_methods)})")
        return self._backend.on_host(getattr(self._rng, name), f"Generator.{name}")
