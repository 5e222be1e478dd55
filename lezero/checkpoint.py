"""Gradient checkpointing: trade compute for memory by recomputing a block in backward.

    y = lz.checkpoint(block, x)            # or: block = lz.checkpoint(block); y = block(x)
    net = lz.checkpoint_sequential(layers, segments="sqrt")   # a callable

How it works, on LeZero's own engine (no nested "reentrant" backward, hooks intact):

1. **Forward** runs the block once under ``no_grad`` (nothing is recorded, so nothing it
   computes is kept), with a FunctionHook that notes every Variable from *outside* the
   block that needs a gradient: the inputs, but also the parameters it touches and any
   captured Variable.  One ``Checkpoint`` Function is recorded whose inputs are exactly
   those Variables and whose outputs are the block's outputs.  The graph therefore holds
   only the block's inputs.
2. **Backward** of that node re-runs the block with recording on: the process generator
   (dropout masks), ``Config.train``/``use_numba``, and hooks that mark themselves
   replayable (autocast) are restored; every outside Variable entering a Function is
   swapped for a leaf stand-in sharing its data; module buffers (BatchNorm running
   statistics) are restored afterwards, so they are updated once.  ``lz.grad`` of the
   recomputed outputs with respect to the stand-ins gives the node's input gradients,
   which the outer engine accumulates: a parameter's hooks and post-accumulate hooks run
   once, after its full gradient is known, even if it is also used outside the block.
3. With ``create_graph`` the stand-ins are relinked to the real inputs afterwards, so
   the returned gradients are differentiable again (double backward works).

``policy`` keeps chosen outputs instead of recomputing them (JAX's checkpoint policies):
``policy=policies.dots_saveable`` keeps matmul/linear/tensordot/einsum results; the
recomputation then reuses them.  Any ``callable(function) -> bool`` works; it must only
select Functions whose forward does not depend on whether gradients are needed.
"""
import functools
import math
import sys
import weakref

import numpy as np

from lezero import cuda
from lezero.core import (Function, FunctionHook, Variable, enable_grad, get_config,
                         get_rng_state, grad, no_grad, set_rng_state, using_config)
from lezero.utils.checks import check_bool, check_callable, check_int, describe

__all__ = ["checkpoint", "checkpoint_sequential", "policies", "Checkpoint"]


# ----- policies ---------------------------------------------------------------------------

def _save_only(*names):
    """A policy keeping the outputs of the Function classes named (or given)."""
    keep = frozenset(n if isinstance(n, str) else n.__name__ for n in names)
    policy = lambda function: type(function).__name__ in keep    # noqa: E731
    policy.__name__ = f"save_only({', '.join(sorted(keep))})"
    return policy


class policies:
    """Named checkpoint policies (JAX's names)."""
    nothing_saveable = None
    everything_saveable = staticmethod(lambda function: True)
    dots_saveable = staticmethod(_save_only("MatMul", "Linear", "Tensordot", "Einsum"))
    save_only = staticmethod(_save_only)


def _check_policy(policy):
    if isinstance(policy, str):
        if policy not in ("nothing_saveable", "everything_saveable", "dots_saveable"):
            raise ValueError(f"checkpoint: policy must be None, a callable or one of "
                             f"'nothing_saveable', 'everything_saveable', 'dots_saveable', "
                             f"got {policy!r}")
        return getattr(policies, policy)
    return check_callable("checkpoint", "policy", policy, allow_none=True)


# ----- hooks used while the block runs ----------------------------------------------------
# They are unhashable (``__hash__ = None``): the core caches configuration snapshots by
# (name, value), and a hashable hooks tuple would keep them, with the Variables and arrays
# they hold, alive in that cache after the block has run.

class _Discover(FunctionHook):
    """No-grad forward: collect the outside Variables that need a gradient (anything that
    requires grad there comes from outside, since nothing inside is recorded), and keep
    the outputs the policy selects."""

    __hash__ = None

    def __init__(self, policy):
        self.found = {}
        self.policy = policy
        self.kept = []

    def note(self, x):
        if x.requires_grad and id(x) not in self.found:
            self.found[id(x)] = x

    def transform_inputs(self, function, inputs):
        for x in inputs:
            self.note(x)
        if self.policy is not None and self.policy(function):
            _capture(function, self.kept)
        return inputs


def _capture(function, kept):
    """Wrap ``function.forward`` to store its outputs and the state it sets."""
    # No closure over the instance (a reference cycle would delay freeing the graph).
    own, unbound = vars(function).get("forward"), type(function).forward
    ref = weakref.ref(function)

    def run(*xs):
        function = ref()
        before = dict(vars(function))
        ys = own(*xs) if own is not None else unbound(function, *xs)
        state = {k: v for k, v in vars(function).items()
                 if k != "forward" and before.get(k) is not v}
        kept.append((type(function).__name__, [x.shape for x in xs], ys, state))
        return ys
    function.forward = run


class _Replay(FunctionHook):
    """Recomputation: hand the kept outputs back to the Functions that made them."""

    __hash__ = None

    def __init__(self, kept, policy):
        self.kept = list(kept)
        self.policy = policy

    def transform_inputs(self, function, inputs):
        if self.policy(function):
            name, shapes, ys, state = self.kept.pop(0)
            if name != type(function).__name__ or shapes != [x.shape for x in inputs]:
                raise RuntimeError(f"checkpoint: the recomputation called {type(function).__name__}"
                                   f" where the forward called {name}; a checkpointed block "
                                   "must run the same operators each time")
            vars(function).update(state)
            function.forward = lambda *xs: ys
        return inputs


class _Substitute(FunctionHook):
    """Recomputation: outside Variables enter the block's Functions as leaf stand-ins."""

    __hash__ = None

    def __init__(self, mapping):
        self.mapping = mapping

    def transform_inputs(self, function, inputs):
        get = self.mapping.get
        return [get(id(x), x) for x in inputs]


# ----- the recorded node ------------------------------------------------------------------

class Checkpoint(Function):
    """One node standing for a whole block; its backward recomputes the block."""

    autocast_policy = "passthrough"

    def __init__(self, block):
        self.block = block
        self._outputs = None

    def forward(self, *xs):
        outs, self._outputs = self._outputs, None      # computed already; keep no copy
        return outs[0] if len(outs) == 1 else tuple(outs)

    def backward(self, *gys):
        return self.block.backward(self.inputs, gys)

    def __saved_arrays__(self):
        """What the node keeps besides its inputs (for lezero.utils.memory): the arrays
        among the block's arguments and the outputs a policy kept."""
        b = self.block
        for v in _flatten([list(b.args), list(b.kwargs.values()),
                           [k[2] for k in b.kept]], []):
            data = v.data if isinstance(v, Variable) else v
            if isinstance(data, cuda.array_types()):
                yield data


class _Relink(Function):
    """Identity; after a create_graph recomputation it links a stand-in to its input."""

    def backward(self, gy):
        return gy


def _relink(stand_ins, inputs):
    for s, x in zip(stand_ins, inputs):
        f = _Relink()
        f.inputs, f.outputs = [x], [weakref.ref(s)]
        f.generation, f.needs_input_grad = x.generation, (x.requires_grad,)
        s.creator = f


class _Block:
    """What the node needs to run the block again."""

    def __init__(self, fn, args, kwargs, policy, preserve_rng_state):
        cfg = get_config()
        self.fn, self.args, self.kwargs, self.policy = fn, args, kwargs, policy
        self.train, self.use_numba = cfg.train, cfg.use_numba
        # fresh copies: the forward's own hooks would keep their caches alive
        self.replay = tuple(h.for_recompute() for h in cfg.function_hooks
                            if hasattr(h, "for_recompute"))
        self.rng = _RngState() if preserve_rng_state else None
        self.modules = _modules_of(fn, args, kwargs)
        self.kept, self.positions = [], []

    def backward(self, inputs, gys):
        create = get_config().enable_backprop
        stand_ins = []
        for x in inputs:
            s = Variable(x.data, requires_grad=True)
            s.generation = x.generation + 1
            stand_ins.append(s)
        subst = _Substitute({id(x): s for x, s in zip(inputs, stand_ins)})
        hooks = (subst,) + tuple(h for h in get_config().function_hooks
                                 if not hasattr(h, "for_recompute"))
        hooks += tuple(h.for_recompute() for h in self.replay)
        if self.kept:
            hooks += (_Replay(self.kept, self.policy),)
        buffers = _snapshot(self.modules)
        try:
            with using_config("function_hooks", hooks), using_config("train", self.train), \
                    using_config("use_numba", self.use_numba), enable_grad(), \
                    _replaying(self.rng):
                out = self.fn(*self.args, **self.kwargs)
        finally:
            _restore(buffers)
        flat = _flatten(out, [])
        ys = [subst.mapping.get(id(flat[i]), flat[i]) for i in self.positions]
        pairs = [(y, g) for y, g in zip(ys, gys) if y.requires_grad]
        if not pairs:
            return (None,) * len(inputs)
        grads = grad([y for y, _ in pairs], stand_ins, [g for _, g in pairs],
                     create_graph=create, allow_unused=True)
        if create:
            _relink(stand_ins, inputs)
        return grads


# ----- state around the recomputation -----------------------------------------------------

class _RngState:
    """The process generator's state; on CuPy also a per-block seed (CuPy's generator
    state cannot be copied, so a checkpointed block draws from its own seeded one)."""

    def __init__(self):
        self.numpy = get_rng_state()
        self.cupy_seed = None
        if "cupy" in sys.modules and cuda.is_available():
            from lezero.core import get_rng
            self.cupy_seed = int(get_rng(sys.modules["cupy"]).integers(2 ** 62))


class _replaying:
    """Context: the generators as they were when the block first ran (``rewind``), or
    only the block's own CuPy generator (the first run)."""

    def __init__(self, state, rewind=True):
        self.state, self.rewind = state, rewind

    def __enter__(self):
        if self.state is None:
            return
        if self.rewind:
            self.now = get_rng_state()
            set_rng_state(self.state.numpy)
        self.cupy = _swap_cupy_rng(self.state.cupy_seed)

    def __exit__(self, *exc):
        if self.state is not None:
            if self.rewind:
                set_rng_state(self.now)
            _swap_cupy_rng(None, self.cupy)
        return False


def _swap_cupy_rng(seed, previous=None):
    """Install a CuPy generator seeded with ``seed`` (or put ``previous`` back); return
    the one it replaced."""
    if seed is None and previous is None:
        return None
    import lezero.core.random as random_module
    old = getattr(random_module, "_cupy_rng", None)
    random_module._cupy_rng = previous if seed is None else \
        sys.modules["cupy"].random.default_rng(seed)
    return old


def _is_module(obj):
    return hasattr(obj, "named_buffers") and hasattr(obj, "modules")


def _modules_of(fn, args, kwargs):
    """Modules the block can reach: fn itself, a bound method's owner, wrappers, closure
    cells, globals the code names, and the arguments (for restoring their buffers)."""
    found, seen = [], set()

    def visit(obj, depth):
        if obj is None or depth > 4 or id(obj) in seen:
            return
        seen.add(id(obj))
        if _is_module(obj):
            found.append(obj)
            return
        if isinstance(obj, (list, tuple)):
            for o in obj:
                visit(o, depth + 1)
            return
        if isinstance(obj, functools.partial):
            visit(obj.func, depth + 1)
            visit(obj.args, depth + 1)
        for attr in ("__self__", "__wrapped__", "module"):
            visit(getattr(obj, attr, None), depth + 1)
        for cell in getattr(obj, "__closure__", None) or ():
            try:
                visit(cell.cell_contents, depth + 1)
            except ValueError:                       # an empty cell
                pass
        code, env = getattr(obj, "__code__", None), getattr(obj, "__globals__", None)
        if code is not None and env is not None:
            for name in code.co_names:
                visit(env.get(name), depth + 1)

    visit(fn, 0)
    for a in list(args) + list(kwargs.values()):
        visit(a, 1)
    return found


def _snapshot(modules):
    """(module, name, array, copy) for every buffer of the modules."""
    out, seen = [], set()
    for m in modules:
        for sub in m.modules():
            for name, buf in sub.named_buffers(recurse=False):
                if buf is not None and id(buf) not in seen:
                    seen.add(id(buf))
                    out.append((sub, name, buf, buf.copy()))
    return out


def _restore(snapshot):
    for module, name, buf, saved in snapshot:
        buf[...] = saved
        setattr(module, name, buf)


# ----- outputs ----------------------------------------------------------------------------

def _flatten(out, acc):
    """Leaves of nested tuples/lists/dicts, in order (Variables and everything else)."""
    if isinstance(out, (tuple, list)):
        for o in out:
            _flatten(o, acc)
    elif isinstance(out, dict):
        for o in out.values():
            _flatten(o, acc)
    else:
        acc.append(out)
    return acc


def _rebuild(out, leaves):
    """``out``'s structure with its leaves taken in order from the iterator ``leaves``."""
    if isinstance(out, (tuple, list)):
        items = [_rebuild(o, leaves) for o in out]
        return type(out)(*items) if hasattr(out, "_fields") else type(out)(items)
    if isinstance(out, dict):
        return type(out)((k, _rebuild(v, leaves)) for k, v in out.items())
    return next(leaves)


def _is_float(v):
    return v.dtype.kind == "f" or v.dtype.name == "bfloat16"


def _run(fn, args, kwargs, policy, preserve_rng_state):
    """One checkpointed call of ``fn(*args, **kwargs)``."""
    if not get_config().enable_backprop:            # no_grad: just run it, once
        return _checked(fn, fn(*args, **kwargs))
    block = _Block(fn, args, kwargs, policy, preserve_rng_state)
    discover = _Discover(policy)
    with using_config("function_hooks", get_config().function_hooks + (discover,)), \
            no_grad(), _replaying(block.rng, rewind=False):
        out = _checked(fn, fn(*args, **kwargs))
    flat = _flatten(out, [])
    for v in flat:
        if isinstance(v, Variable):
            discover.note(v)                        # an input returned as it is
    inputs = list(discover.found.values())
    block.positions = [i for i, v in enumerate(flat) if isinstance(v, Variable) and _is_float(v)]
    if not inputs or not block.positions:
        return out                                  # nothing needs a gradient
    block.kept = discover.kept
    node = Checkpoint(block)
    node._outputs = [flat[i].data for i in block.positions]
    ys = node(*inputs)
    ys = ys if isinstance(ys, list) else [ys]
    for i, y in zip(block.positions, ys):
        flat[i] = y
    return _rebuild(out, iter(flat))


def _checked(fn, out):
    if not any(isinstance(v, Variable) for v in _flatten(out, [])):
        name = getattr(fn, "__name__", type(fn).__name__)
        raise TypeError(f"checkpoint: fn ({name}) returned {describe(out)}; it must return "
                        "a Variable, or a tuple/list/dict holding Variables")
    return out


def _signature_source(fn):
    return fn.forward if hasattr(fn, "forward") and _is_module(fn) else fn


def checkpoint(fn=None, *args, policy=None, preserve_rng_state=True, **kwargs):
    """Checkpoint ``fn``: ``checkpoint(fn, *args, **kwargs)`` runs it now;
    ``checkpoint(fn)`` (or ``@checkpoint``, ``@checkpoint(policy=...)``) returns a wrapper
    with ``fn``'s signature.  ``fn`` is a function or a Module; it must return a Variable
    or a tuple/list/dict of them (other values pass through)."""
    policy = _check_policy(policy)
    preserve_rng_state = check_bool("checkpoint", "preserve_rng_state", preserve_rng_state)
    if fn is None:
        return lambda f: checkpoint(f, policy=policy, preserve_rng_state=preserve_rng_state)
    check_callable("checkpoint", "fn", fn)
    if args or kwargs:
        return _run(fn, args, kwargs, policy, preserve_rng_state)

    @functools.wraps(_signature_source(fn))
    def wrapper(*a, **k):
        return _run(fn, a, k, policy, preserve_rng_state)
    wrapper.module = fn if _is_module(fn) else None
    return wrapper


def _segment(modules):
    def run(x):
        for m in modules:
            x = m(x)
        return x
    return run


def checkpoint_sequential(modules, segments="sqrt", *inputs, policy=None):
    """Run ``modules`` (a Sequential or a list of callables) in ``segments`` checkpointed
    pieces ("sqrt": about sqrt(len) pieces, the memory-optimal choice).  Unlike torch the
    last piece is checkpointed too: LeZero keeps a graph until it is dropped, so an
    unchecked last piece would stay in memory through the whole backward.  Without inputs,
    returns a callable; ``checkpoint_sequential(modules, segments, x)`` runs it on x."""
    layers = list(modules.children()) if _is_module(modules) else modules
    if not isinstance(layers, (list, tuple)) or not layers:
        raise TypeError(f"checkpoint_sequential: modules must be a Sequential or a non-empty "
                        f"list of callables, got {describe(modules)}")
    for i, m in enumerate(layers):
        check_callable("checkpoint_sequential", f"modules[{i}]", m)
    n = len(layers)
    if segments == "sqrt":
        segments = max(1, round(math.sqrt(n)))
    elif isinstance(segments, str):
        raise ValueError(f"checkpoint_sequential: segments must be 'sqrt' or an int, got "
                         f"{segments!r}")
    k = check_int("checkpoint_sequential", "segments", segments, low=1, high=n)
    bounds = np.linspace(0, n, k + 1).round().astype(int)
    pieces = [layers[a:b] for a, b in zip(bounds[:-1], bounds[1:])]
    runs = [checkpoint(_segment(p), policy=policy) for p in pieces]

    def run(x):
        for r in runs:
            x = r(x)
        return x
    run.segments = [len(p) for p in pieces]
    return run(*inputs) if inputs else run
