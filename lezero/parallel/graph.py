"""Helpers DataParallel needs from the graph and the module: which leaves an output
reaches, and rank 0's buffers copied to every rank (coalesced, one broadcast per dtype)."""
from lezero import cuda
from lezero.backends import get_backend
from lezero.core import Variable
from lezero.core import count_leaf_uses


def variables_in(obj):
    """The Variables inside a forward's output (a Variable, or tuples, lists, dicts)."""
    if isinstance(obj, Variable):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            yield from variables_in(x)
    elif isinstance(obj, dict):
        for x in obj.values():
            yield from variables_in(x)


def reachable_leaves(out):
    """The set of leaf Variables a backward from ``out`` would give a gradient to (the
    backward engine's own first walk over the graph)."""
    outputs = list(variables_in(out))
    leaves = {y for y in outputs if y.creator is None and y.requires_grad}
    return leaves | set(count_leaf_uses(outputs))


def broadcast_buffers(module, comm, root=0):
    """Overwrite every buffer of ``module`` with ``root``'s (in place, so layers and
    optimizers holding the arrays see the new values)."""
    groups = {}
    for _, b in module.named_buffers():
        if b is not None and b.size:
            groups.setdefault((b.dtype.str, get_backend(b).name), []).append(b)
    for bufs in groups.values():
        xp = cuda.get_array_module(bufs[0])
        flat = xp.concatenate([b.reshape(-1) for b in bufs])
        comm.bcast(flat, root)
        offset = 0
        for b in bufs:
            b[...] = flat[offset:offset + b.size].reshape(b.shape)
            offset += b.size
