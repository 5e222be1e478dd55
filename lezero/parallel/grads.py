"""Gradient reductions after a step that DataParallel's hooks do not cover.

``allreduce_gradients`` averages (or sums) the ``.grad`` of parameters over a
communicator with one all-reduce per dtype (the gradients are packed into one flat
buffer): what a pipeline stage needs over its data-parallel group once all its
micro-batches are done (Megatron waits for the same point), and what two stages holding
the two ends of a tied weight need over their embedding group.  ``agree_on_nonfinite``
makes every rank see a non-finite gradient when any rank has one, so a loss scaler on
each rank skips the same steps.
"""
import numpy as np

from lezero import cuda
from lezero.core import Variable


def _grads(parameters):
    """(parameter, gradient array) for the parameters that have one, in order."""
    out = []
    for p in parameters:
        if p.grad is not None:
            out.append((p, p.grad.data if isinstance(p.grad, Variable) else p.grad))
    return out


def allreduce_gradients(parameters, comm, op="mean"):
    """All-reduce every parameter's gradient over ``comm`` in place (``op`` "mean" or
    "sum"); the ranks must pass the same parameters (shapes, dtypes, order).  A
    parameter without a gradient must lack one on every rank."""
    from lezero.utils.checks import check_choice
    op = check_choice("parallel.allreduce_gradients", "op", op, ("mean", "sum"))
    if comm is None or comm.size == 1:
        return
    pairs = _grads(list(parameters))
    by_dtype = {}
    for p, g in pairs:
        by_dtype.setdefault((g.dtype.str, cuda.get_array_module(g).__name__), []).append((p, g))
    for group in by_dtype.values():
        xp = cuda.get_array_module(group[0][1])
        flat = xp.concatenate([g.ravel() for _, g in group])
        flat = comm.allreduce(flat, op, out=flat)
        offset = 0
        for p, g in group:
            g[...] = flat[offset:offset + g.size].reshape(g.shape)
            offset += g.size


def agree_on_nonfinite(parameters, comm):
    """If any rank of ``comm`` has a non-finite gradient, make one of this rank's
    gradients non-finite too (so each rank's GradScaler skips the step); returns whether
    any rank had one."""
    pairs = _grads(list(parameters))
    mine = any(not bool(cuda.get_array_module(g).isfinite(g).all()) for _, g in pairs)
    anyone = bool(comm.allreduce(np.array([int(mine)], np.int32), "max")[0])
    if anyone and not mine and pairs:
        g = pairs[0][1]
        g[(0,) * g.ndim] = np.inf
    return anyone
