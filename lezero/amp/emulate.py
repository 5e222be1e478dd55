"""How an operator runs once autocast has chosen its input dtypes.

NumPy has no fast float16 arithmetic (``np.matmul`` on float16 has no BLAS and is orders
of magnitude slower) and no bfloat16 at all (``ml_dtypes`` stores it).  So on NumPy an
operator that receives low-precision arrays computes in float32 and rounds its results to
the low dtype: storage, memory and rounding are those of float16 (a GPU kernel also
accumulates in float32 and rounds once per output), only the arithmetic is wider.  On
CuPy the operator runs natively in the low dtype.  ``float32_compute`` operators
(normalizations) get the same float32 arithmetic on both backends.

Three pieces, all acting on one Function *instance* (an instance serves one call):

* ``run_in_float32(f, out_dtype)`` wraps ``f.forward``: low inputs are upcast, float32
  outputs rounded to ``out_dtype``, and what ``f`` keeps for backward is tidied (large new
  float32 arrays rounded; cache entries holding the float32 copies of the inputs, or
  views of them, dropped) so memory stays that of the low dtype.
* ``wrap_backward(f, ...)`` makes ``f.backward`` run with autocast off (torch's rule:
  backward runs in the dtypes forward chose), with ``EMULATION`` active on NumPy, and
  returns each gradient in its input's dtype.  A backward whose forward ran in float32
  sees float32 copies of its inputs, upstream gradients and rounded saved arrays, so it
  also computes in float32 and only its results are rounded.
* A Function class with ``amp_saves_low`` (the fused LSTM) is told the low dtype
  (``amp_saved_dtype``) and keeps its saved arrays in it as it produces them, and its
  backward gets its low inputs and upstream gradients as they are and lifts what it reads
  a piece at a time: no float32 copy of them all exists at once.
* ``EMULATION`` is a FunctionHook that applies the first to every Function a backward
  calls (and, under ``create_graph``, the second), so backward's matmuls run in float32 too.
"""
import weakref

import numpy as np

from lezero import cuda
from lezero.backends import get_backend
from lezero.amp.cast import Cast, promote
from lezero.amp.convert import convert
from lezero.amp.dtypes import is_floating, is_low
from lezero.amp.policy import FLOAT32_COMPUTE
from lezero.core import FunctionHook, InputRef, Variable, get_config, using_config

__all__ = ["prepare", "run_in_float32", "wrap_backward", "EMULATION", "MOVEMENT", "method"]

# Functions that only move data: they run in the low dtype as they are (no arithmetic).
MOVEMENT = frozenset([
    "Cast", "Checkpoint", "Reshape", "Transpose", "BroadcastTo", "GetItem", "Concatenate",
    "Split", "Flip", "Roll", "ConstantPad", "Tri", "MaskedFill", "Gather", "GatherAlong",
    "IndexGather", "Embedding", "_RowGather", "_RowScatter"])

_F32 = np.dtype(np.float32)


def method(function, name):
    """``function.<name>`` as a plain callable that does not keep ``function`` alive.

    Wrappers are stored on the instance; a closure over the instance (or its bound
    method) would be a reference cycle, and the graph would then wait for the cyclic
    garbage collector instead of being freed when its last Variable goes."""
    own = vars(function).get(name)
    if own is not None:                 # an earlier wrapper: holds no strong reference
        return own
    unbound, ref = getattr(type(function), name), weakref.ref(function)
    return lambda *args: unbound(ref(), *args)


def _is_array(a):
    return isinstance(a, cuda.array_types())


def _owner(a):
    """The array that owns ``a``'s memory (NumPy points every view straight at it)."""
    while _is_array(getattr(a, "base", None)):
        a = a.base
    return a


def _refers(value, owners, depth=0):
    """True when ``value`` is, views, or holds (in tuples, lists, dicts) an array whose
    owner's id is in ``owners``."""
    if _is_array(value):
        return id(_owner(value)) in owners
    if depth < 3 and isinstance(value, (tuple, list)):
        return any(_refers(v, owners, depth + 1) for v in value)
    if depth < 3 and isinstance(value, dict):
        return any(_refers(v, owners, depth + 1) for v in value.values())
    return False


def _drop_entries(cache, owners):
    """Delete from ``cache`` (and the dicts nested in it) the entries that hold an upcast
    input: backward presents fresh float32 copies, so they would never be found again."""
    for k, v in list(cache.items()):
        if isinstance(v, dict):
            _drop_entries(v, owners)
        elif _refers(v, owners):
            del cache[k]


def _tidy(function, before, originals, rounded, out_dtype, min_size):
    """After a float32 forward: make ``function`` keep low-precision arrays only; returns
    the names of the attributes it rounded (backward gets float32 copies of them).
    ``originals``: {id(upcast copy): (the copy, the low-precision input)}."""
    names, owners = [], {id(_owner(up)) for up, _ in originals.values()}
    for key, value in list(vars(function).items()):
        if isinstance(value, dict):                  # caches keyed by the input array
            _drop_entries(value, owners)
            continue
        if not _is_array(value) or before.get(key) is value:
            continue
        if id(value) in originals:                   # the upcast copy of an input
            setattr(function, key, originals[id(value)][1])
            names.append(key)
        elif id(value) in rounded:                   # an output it also keeps
            setattr(function, key, rounded[id(value)])
            names.append(key)
        elif out_dtype is not None and value.dtype == _F32 and value.size >= min_size:
            setattr(function, key, convert(value, out_dtype))
            names.append(key)
    return names


def run_in_float32(function, out_dtype, keep_dtype=None):
    """Wrap ``function.forward`` to compute in float32 and round to ``out_dtype`` (None:
    keep float32 results); its backward (see ``wrap_backward``) then runs in float32 too.
    What it keeps is rounded to ``keep_dtype`` (default ``out_dtype``): a loss returns
    float32 but keeps input-sized arrays in its input's dtype."""
    forward, ref = method(function, "forward"), weakref.ref(function)
    keep = out_dtype if keep_dtype is None else keep_dtype
    if keep is not None and is_low(keep) and getattr(type(function), "amp_saves_low", False):
        # It rounds what it keeps itself, as it produces it (the fused LSTM, a step at a
        # time): no float32 copy of its saved arrays ever exists beside the rounded one.
        function.amp_saved_dtype = np.dtype(keep)

    def run(*xs):
        function = ref()
        originals, ins = {}, []
        for x in xs:
            if _is_array(x) and is_low(x.dtype):
                up = convert(x, _F32)
                originals[id(up)] = (up, x)
                ins.append(up)
            else:
                ins.append(x)
        before = dict(vars(function))
        ys = forward(*ins)
        single = not isinstance(ys, tuple)
        outs = [ys] if single else list(ys)
        rounded = {}
        with np.errstate(over="ignore", invalid="ignore"):
            if out_dtype is not None:
                for i, y in enumerate(outs):
                    if _is_array(y) and y.dtype == _F32:
                        outs[i] = rounded[id(y)] = convert(y, out_dtype)
            sizes = [y.size for y in (outs if out_dtype is not None else xs) if _is_array(y)]
            names = _tidy(function, before, originals, rounded, keep, min(sizes, default=0))
            if names:                                # (most keep nothing rounded)
                function._amp_rounded = tuple(names)
        if vars(function).get("forward") is run:     # an instance serves one call: the
            del function.forward                     # wrapper need not outlive it
        return outs[0] if single else tuple(outs)

    function.forward = run
    function._amp_float32 = True


def _up(v, create):
    """A float32 view of a low-precision Variable (or array) for backward (graph-linked
    when ``create``)."""
    if v is None or not is_low(v.dtype) or isinstance(v, InputRef):
        return v                                     # (a released input: no array to lift)
    if create:
        return Cast(_F32)(v)
    if _is_array(v):                                 # backward_arrays' upstream gradient
        return convert(v, _F32)
    return Variable(convert(v.data, _F32), requires_grad=v.requires_grad)


def _backward_in_float32(function, backward, gys):
    """Run ``backward`` with the inputs, upstream gradients and rounded saved arrays of
    ``function`` presented in float32, then put everything back."""
    create = get_config().enable_backprop
    inputs, saved = function.inputs, {}
    for name in vars(function).get("_amp_rounded", ()):
        saved[name] = value = getattr(function, name)
        if is_low(value.dtype):
            setattr(function, name, convert(value, _F32))
    # One that keeps its saved arrays low itself (amp_saves_low) also lifts its inputs
    # and upstream gradients itself, a piece at a time.
    lifts = vars(function).get("amp_saved_dtype") is None
    if lifts:
        function.inputs = [_up(x, create) for x in inputs]
    try:
        return backward(*[_up(g, create) for g in gys] if lifts else gys)
    finally:
        function.inputs = inputs
        for name, value in saved.items():
            setattr(function, name, value)


def _match_dtypes(inputs, gxs):
    """Each gradient in its input's dtype (torch's invariant: grad.dtype == x.dtype)."""
    single = not isinstance(gxs, tuple)
    seq = (gxs,) if single else gxs
    if len(seq) != len(inputs):
        return gxs                                   # the engine reports the mismatch
    out = []
    for x, g in zip(inputs, seq):
        data = g.data if isinstance(g, Variable) else g
        if g is not None and _is_array(data) and data.dtype != x.dtype \
                and is_floating(data.dtype) and is_floating(x.dtype):
            if isinstance(g, Variable) and get_config().enable_backprop:
                g = Cast(x.dtype)(g)                 # create_graph: stay differentiable
            else:
                g = convert(data, x.dtype)
        out.append(g)
    return out[0] if single else tuple(out)


def wrap_backward(function, emulate, replay=None):
    """Run ``function.backward`` (and ``backward_arrays``, where it has one) with autocast
    off (or under ``replay``, a fresh autocast hook, for ``custom_bwd`` Functions) and
    EMULATION on when ``emulate``."""
    ref = weakref.ref(function)
    for name in ("backward", "backward_arrays"):
        if getattr(type(function), name) is not None:
            inner = getattr(function, name)             # an earlier wrapper, or the method
            inner = inner if type(inner) is _Backward else None
            setattr(function, name, _Backward(ref, name, inner, emulate, replay))


class _Backward:
    """``function.<name>`` run as ``wrap_backward`` says.  An object with slots rather than
    a closure: every Function an autocast region records carries one or two, kept until
    backward, and a closure with its cells costs several times the bytes."""

    __slots__ = ("ref", "name", "inner", "emulate", "replay")

    def __init__(self, ref, name, inner, emulate, replay):
        # ref: a weak reference to the Function (a strong one would be a cycle);
        # inner: an earlier wrapper of the same method, else None (the class's method)
        self.ref, self.name, self.inner = ref, name, inner
        self.emulate, self.replay = emulate, replay

    def __call__(self, *gys):
        function = self.ref()
        backward = self.inner or getattr(type(function), self.name).__get__(function)
        hooks = tuple(h for h in get_config().function_hooks
                      if not getattr(h, "is_autocast", False) and h is not EMULATION)
        if self.replay is not None:
            hooks += (self.replay.for_recompute(),)
        if self.emulate:
            hooks += (EMULATION,)
        with using_config("function_hooks", hooks):
            if "_amp_float32" in vars(function):
                gxs = _backward_in_float32(function, backward, gys)
            else:
                gxs = backward(*gys)
        return _match_dtypes(function.inputs, gxs)


def prepare(function, inputs, treatment=None, autocast=None):
    """Arrange how ``function`` runs on ``inputs`` (Variables, already cast)."""
    # Already wrapped: nothing to do.  Told by getattr, not vars(), which would make a
    # dict object for every Function of the graph (Python keeps attributes without one).
    if isinstance(function, Cast) or getattr(function, "_amp_float32", False) \
            or type(function.backward) is _Backward:
        return
    arrays = [x.data for x in inputs if x.data is not None]   # None: a released input
    on_numpy = not get_backend(*arrays).capabilities.float16     # NumPy: emulated
    floats = [a.dtype for a in arrays if is_floating(a.dtype)]
    has_low = any(is_low(d) for d in floats)
    if treatment == FLOAT32_COMPUTE:
        if floats and is_low(floats[0]):
            out = None if getattr(function, "float32_output", False) else floats[0]
            run_in_float32(function, out, floats[0])
    elif has_low and on_numpy and type(function).__name__ not in MOVEMENT:
        out = promote(floats)
        run_in_float32(function, out if is_low(out) else None)
    if get_config().enable_backprop and (has_low or autocast is not None):
        replay = autocast if getattr(type(function).backward, "autocast_backward", False) \
            or getattr(type(function), "autocast_backward", False) else None
        wrap_backward(function, on_numpy, replay)


class _Emulation(FunctionHook):
    """Active inside backward on NumPy: low-precision Functions compute in float32."""

    def transform_inputs(self, function, inputs):
        if not any(getattr(h, "is_autocast", False) for h in get_config().function_hooks):
            prepare(function, inputs)
        return inputs


EMULATION = _Emulation()
