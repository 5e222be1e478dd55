"""``checkpoint`` and ``checkpoint_sequential``."""
import functools
import math

import numpy as np

from lezero.checkpoint.hooks import Discover
from lezero.checkpoint.node import Block, Checkpoint, flatten, is_float, rebuild
from lezero.checkpoint.policies import check_policy
from lezero.checkpoint.state import is_module, replaying
from lezero.core import Variable, get_config, no_grad, using_config
from lezero.utils.checks import check_bool, check_callable, check_int, describe

__all__ = ["checkpoint", "checkpoint_sequential"]


def _run(fn, args, kwargs, policy, preserve_rng_state):
    """One checkpointed call of ``fn(*args, **kwargs)``."""
    if not get_config().enable_backprop:            # no_grad: just run it, once
        return _checked(fn, fn(*args, **kwargs))
    block = Block(fn, args, kwargs, policy, preserve_rng_state)
    discover = Discover(policy)
    with using_config("function_hooks", get_config().function_hooks + (discover,)), \
            no_grad(), replaying(block.rng, rewind=False):
        out = _checked(fn, fn(*args, **kwargs))
    flat = flatten(out, [])
    for v in flat:
        if isinstance(v, Variable):
            discover.note(v)                        # an input returned as it is
    inputs = list(discover.found.values())
    block.positions = [i for i, v in enumerate(flat) if isinstance(v, Variable) and is_float(v)]
    if not inputs or not block.positions:
        return out                                  # nothing needs a gradient
    block.kept = discover.kept
    node = Checkpoint(block)
    node._outputs = [flat[i].data for i in block.positions]
    ys = node(*inputs)
    ys = ys if isinstance(ys, list) else [ys]
    for i, y in zip(block.positions, ys):
        flat[i] = y
    return rebuild(out, iter(flat))


def _checked(fn, out):
    if not any(isinstance(v, Variable) for v in flatten(out, [])):
        name = getattr(fn, "__name__", type(fn).__name__)
        raise TypeError(f"checkpoint: fn ({name}) returned {describe(out)}; it must return "
                        "a Variable, or a tuple/list/dict holding Variables")
    return out


def _signature_source(fn):
    return fn.forward if hasattr(fn, "forward") and is_module(fn) else fn


def checkpoint(fn=None, *args, policy=None, preserve_rng_state=True, **kwargs):
    """Checkpoint ``fn``: ``checkpoint(fn, *args, **kwargs)`` runs it now;
    ``checkpoint(fn)`` (or ``@checkpoint``, ``@checkpoint(policy=...)``) returns a wrapper
    with ``fn``'s signature.  ``fn`` is a function or a Module; it must return a Variable
    or a tuple/list/dict of them (other values pass through)."""
    policy = check_policy(policy)
    preserve_rng_state = check_bool("checkpoint", "preserve_rng_state", preserve_rng_state)
    if fn is None:
        return lambda f: checkpoint(f, policy=policy, preserve_rng_state=preserve_rng_state)
    check_callable("checkpoint", "fn", fn)
    if args or kwargs:
        return _run(fn, args, kwargs, policy, preserve_rng_state)

    @functools.wraps(_signature_source(fn))
    def wrapper(*a, **k):
        return _run(fn, a, k, policy, preserve_rng_state)
    wrapper.module = fn if is_module(fn) else None
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
    last piece is checkpointed too, so forward leaves only the pieces' boundaries (an
    unchecked last piece would add its activations, about as many again).  Without inputs,
    returns a callable; ``checkpoint_sequential(modules, segments, x)`` runs it on x."""
    layers = list(modules.children()) if is_module(modules) else modules
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
