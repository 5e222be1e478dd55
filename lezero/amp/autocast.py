"""``autocast``: run a region in mixed precision, as ``torch.autocast``.

    with amp.autocast():                 # float16 (the default); amp.autocast("bfloat16")
        loss = F.cross_entropy(model(x), t)
    loss.backward()                      # outside, as torch recommends (inside works too)

    step = amp.autocast()(train_step)    # a wrapper with the same signature
    @amp.autocast("bfloat16")            # a decorator
    def forward(x): ...

It is built on the core's one extension point, ``FunctionHook.transform_inputs``: while a
region is active, every Function call first passes through ``_AutocastHook``, which looks
the Function's class up in the cast policy (``amp.cast_policy``) and puts ``Cast``
Functions in front of the inputs that need another dtype.  Parameters stay float32; their
float16 copies are cached for the region, as torch does, so a weight used at every time
step of an RNN is cast once; a copy's array is dropped right after its last use in the
region (``amp.uses``), or at the latest when the region ends, and backward casts each
weight again as it reaches it (``amp.copies``).  The state lives in the per-thread configuration, so regions
nest, ``autocast(enabled=False)`` switches it off inside, and threads do not see each
other's regions.
"""
import functools

import numpy as np

from lezero.amp.cast import Cast, promote
from lezero.amp.copies import drop, place
from lezero.amp.dtypes import is_floating, is_low, resolve
from lezero.amp.emulate import prepare
from lezero.amp.policy import FLOAT32, LOWER, WIDEST, cast_policy
from lezero.amp.uses import UseCounter
from lezero.backends import get_backend
from lezero.core import FunctionHook, get_config, using_config
from lezero.utils.checks import check_bool, check_callable

__all__ = ["autocast", "is_autocast_enabled", "get_autocast_dtype"]

_F32 = np.dtype(np.float32)


def _is_module(obj):
    return hasattr(obj, "named_parameters") and hasattr(obj, "forward")


class _AutocastHook(FunctionHook):
    """Casts each Function's inputs as the policy says (one hook per entered region)."""

    is_autocast = True

    def __init__(self, dtype, cache_enabled=True):
        self.dtype = dtype
        self.cache_enabled = cache_enabled
        self.cache = {}
        self.uses = UseCounter()     # drops each copy after its last expected use
        self.recorder = None        # precision_report sets a callable here

    def for_recompute(self):
        """A fresh hook with the same settings (checkpoint replays autocast with it)."""
        return _AutocastHook(self.dtype, self.cache_enabled)

    def transform_inputs(self, function, inputs):
        if isinstance(function, Cast):
            return inputs
        treatment, rule = cast_policy.lookup(type(function))
        if treatment == LOWER:
            inputs = [self._lower(x, inputs, function) for x in inputs]
        elif treatment == FLOAT32:
            inputs = _to_float32(inputs)
        elif treatment == WIDEST:
            inputs = _to_widest(inputs)
        prepare(function, inputs, treatment, self)
        if self.recorder is not None:
            self.recorder(function, treatment, rule, inputs)
        return inputs

    def forward_postprocess(self, function, in_data):
        self.uses.after(function)

    def _lower(self, x, inputs, function):
        dtype = x.dtype
        if dtype == self.dtype or not is_floating(dtype) or dtype == np.float64:
            return x                          # torch leaves float64 alone too
        cacheable = self.cache_enabled and x.creator is None and x.requires_grad
        if cacheable:
            key = (id(x), get_config().enable_backprop)
            hit = self.cache.get(key)
            if hit is not None and hit[0] is x and hit[1] is x.data:
                return self.uses.use(x, hit[2], function)
        y = _cast(x, self.dtype)
        if cacheable:
            self.cache[key] = (x, x.data, place(y, inputs))
            self.uses.use(x, y, function)
        return y


def _to_float32(inputs):
    """Low-precision inputs cast to float32, and a 0-d float (a Python scalar, which NumPy
    makes float64 next to bfloat16) with them: ``var(y) ** 0.5`` is float32, as in torch."""
    low = any(is_low(x.dtype) for x in inputs if x.ndim > 0)
    return [_cast(x, _F32) if is_low(x.dtype) or (low and x.ndim == 0 and x.dtype != _F32
                                                  and is_floating(x.dtype)) else x
            for x in inputs]


def _to_widest(inputs):
    """The floating inputs cast to the widest of their dtypes, with torch's rule for 0-d
    inputs (Python scalars): they take the other inputs' dtype instead of widening it, so
    a bfloat16 activation times 0.5 (a float64 scalar next to bfloat16) stays bfloat16."""
    floats = [x for x in inputs if is_floating(x.dtype)]
    shaped = {x.dtype for x in floats if x.ndim > 0}
    dtypes = shaped or {x.dtype for x in floats}
    if len({x.dtype for x in floats}) < 2:
        return inputs
    widest = promote(dtypes)
    return [_cast(x, widest) if is_floating(x.dtype) and x.dtype != widest else x
            for x in inputs]


def _cast(x, dtype):
    backend = get_backend(x)
    if dtype.name == "bfloat16" and not backend.is_host:
        raise ValueError(f"autocast: dtype 'bfloat16' is not available on the {backend.name!r} "
                         "device (CuPy has no bfloat16 type); use amp.autocast('float16') "
                         "there")
    return Cast(dtype)(x)


class autocast:
    """Mixed precision for a region: a context manager, a decorator, or a wrapper.

    ``dtype``: "float16" (default) or "bfloat16" (needs ``ml_dtypes`` on NumPy; not on
    CuPy).  ``enabled=False`` turns autocast off inside an enclosing region.
    ``cache_enabled``: keep one low-precision copy of each parameter for the region.
    """

    def __init__(self, dtype="float16", enabled=True, cache_enabled=True):
        self.enabled = check_bool("autocast", "enabled", enabled)
        self.cache_enabled = check_bool("autocast", "cache_enabled", cache_enabled)
        self.dtype = resolve("autocast", "dtype", dtype)
        self._contexts, self._hooks = [], []

    def __enter__(self):
        hooks = tuple(h for h in get_config().function_hooks
                      if not getattr(h, "is_autocast", False))
        hook = _AutocastHook(self.dtype, self.cache_enabled) if self.enabled else None
        if hook is not None:
            hooks += (hook,)
        ctx = using_config("function_hooks", hooks)
        ctx.__enter__()
        self._contexts.append(ctx)
        self._hooks.append(hook)
        return self

    def __exit__(self, *exc):
        self._contexts.pop().__exit__(*exc)
        hook = self._hooks.pop()
        if hook is not None:                # the region's float16 weight copies go now;
            for entry in hook.cache.values():   # backward recasts them (amp.copies)
                drop(entry[2])
            hook.cache.clear()
            hook.uses.learn()
        return False

    def __call__(self, fn):
        """Wrap ``fn`` (a function or a Module): each call runs inside this region."""
        check_callable("autocast", "fn", fn)
        source = fn.forward if _is_module(fn) else fn
        dtype, enabled, cache = self.dtype, self.enabled, self.cache_enabled

        @functools.wraps(source)
        def wrapper(*args, **kwargs):
            with autocast(dtype, enabled, cache):
                return fn(*args, **kwargs)

        if _is_module(fn):
            wrapper.module = fn
        return wrapper

    def __repr__(self):
        return f"autocast(dtype={self.dtype.name!r}, enabled={self.enabled})"


def _active():
    for h in get_config().function_hooks:
        if getattr(h, "is_autocast", False):
            return h
    return None


def is_autocast_enabled():
    """True inside an enabled autocast region (of this thread)."""
    return _active() is not None


def get_autocast_dtype():
    """The dtype of the active region, or None outside any."""
    hook = _active()
    return None if hook is None else hook.dtype
