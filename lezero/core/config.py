"""Per-thread configuration: ``Config``, ``using_config``, ``no_grad``, ``test_mode``.

Settings live in a ``contextvars.ContextVar`` holding an immutable snapshot, so a serving
thread inside ``no_grad()`` never changes what a training thread sees.  Changing a setting
replaces the snapshot; reading one is a single attribute lookup on the current snapshot.
"""
import contextlib
import contextvars

_DEFAULTS = {
    "enable_backprop": True,   # record graphs for backward
    "train": True,             # dropout / batch-norm behave as in training
    "function_hooks": (),      # active FunctionHook objects (see core.hooks)
    "release_inputs": True,    # honour Functions' save_inputs (core.inputref); off to trace
    "tracing": False,          # jit.trace / onnx.export is recording (jit.is_tracing())
}
# Other parts add their own settings with register_setting (kernels: use_numba).
_PLAIN = frozenset({bool, int, float, str, type(None)})     # values a snapshot cache keys on


class _Settings:
    """One snapshot of the settings; copied, never mutated once published (but the
    default one, which ``register_setting`` extends at import)."""

    def __init__(self, values):
        self.__dict__.update(values)
        self._derived = {}          # (name, value) -> the snapshot ``replace`` made

    def __getattr__(self, name):
        # Only reached for settings registered after this snapshot was made.
        try:
            return _DEFAULTS[name]
        except KeyError:
            raise AttributeError(f"lezero.Config has no setting {name!r}") from None

    def replace(self, name, value):
        """A snapshot equal to this one but for ``name``; cached, since snapshots never
        change (entering ``no_grad`` then costs a dict lookup, not a copy)."""
        # Only plain values are cached: a cached tuple of hooks would keep every hook ever
        # entered (and what it holds) alive.
        key = (name, value) if type(value) in _PLAIN else None
        derived = self._derived
        snap = derived.get(key)
        if snap is None:
            snap = _Settings({**self.__dict__, name: value})     # gets its own _derived
            if key is not None and len(derived) < 64:
                derived[key] = snap
        return snap


_default = _Settings(_DEFAULTS)
_current = contextvars.ContextVar("lezero_config", default=_default)
# ``get_config()``: the current thread's settings snapshot.  Every operator call reads it,
# so it is the ContextVar's own (C) method, not a Python function around it.
get_config = _current.get


def register_setting(name, default):
    """Add a setting (used by AMP, checkpointing, ...) with its default value."""
    _DEFAULTS[name] = default
    # Registering happens at import; snapshots derived before it read the new name from
    # _DEFAULTS (``_Settings.__getattr__``), the default snapshot gets it here.
    setattr(_default, name, default)


class _ConfigMeta(type):
    def __getattr__(cls, name):
        return getattr(get_config(), name)

    def __setattr__(cls, name, value):
        _current.set(get_config().replace(name, value))


class Config(metaclass=_ConfigMeta):
    """The settings of the current thread, read and written as class attributes.

    ``Config.enable_backprop``, ``Config.train`` and ``Config.use_numba`` (registered by
    ``lezero.kernels``) are the main ones.
    Prefer the context managers ``using_config``, ``no_grad`` and ``test_mode``.
    """


def push_setting(name, value):
    """Set ``name`` for the current thread and return a token for ``pop_setting``: the
    ``using_config`` pair without a ``with`` block (the backward engine's fast path)."""
    return _current.set(get_config().replace(name, value))


def pop_setting(token):
    """Undo the ``push_setting`` that returned ``token``."""
    _current.reset(token)


@contextlib.contextmanager
def using_config(name, value):
    """Set ``Config.<name> = value`` inside a ``with`` block (restored on exit)."""
    token = push_setting(name, value)
    try:
        yield
    finally:
        pop_setting(token)


def no_grad():
    """Context manager: run without recording the graph (inference)."""
    return using_config("enable_backprop", False)


def enable_grad():
    """Context manager: record the graph again inside a ``no_grad`` block."""
    return using_config("enable_backprop", True)


def test_mode():
    """Context manager: dropout becomes identity, batch norm uses running statistics."""
    return using_config("train", False)
