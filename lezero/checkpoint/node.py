"""The ``Checkpoint`` Function recorded for a block, and what its backward does."""
import weakref

from lezero import cuda
from lezero.checkpoint.hooks import Replay, Substitute
from lezero.checkpoint.state import (RngState, modules_of, replaying, restore_buffers,
                                     snapshot_buffers)
from lezero.core import Function, Variable, enable_grad, get_config, grad, using_config


class Checkpoint(Function):
    """One node standing for a whole block; its backward recomputes the block."""

    autocast_policy = "passthrough"

    def __init__(self, block):
        self.block = block
        self._outputs = None

    def forward(self, *xs):
        outs, self._outputs = self._outputs, None      # computed already; keep no copy
        self.block.metas = [(o.shape, o.dtype) for o in outs]
        return outs[0] if len(outs) == 1 else tuple(outs)

    def backward(self, *gys):
        return self.block.backward(self.inputs, gys, create=True)

    def backward_arrays(self, *gys):
        grads = self.block.backward(self.inputs, gys, create=False)
        return tuple(None if g is None else g.data for g in grads)

    def __saved_arrays__(self):
        """What the node keeps besides its inputs (for lezero.utils.memory): the arrays
        among the block's arguments and the outputs a policy kept."""
        b = self.block
        for v in flatten([list(b.args), list(b.kwargs.values()),
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


class Block:
    """What the node needs to run the block again."""

    def __init__(self, fn, args, kwargs, policy, preserve_rng_state):
        cfg = get_config()
        self.fn, self.args, self.kwargs, self.policy = fn, args, kwargs, policy
        self.train, self.use_numba = cfg.train, cfg.use_numba
        # fresh copies: the forward's own hooks would keep their caches alive
        self.replay = tuple(h.for_recompute() for h in cfg.function_hooks
                            if hasattr(h, "for_recompute"))
        self.rng = RngState() if preserve_rng_state else None
        self.modules = modules_of(fn, args, kwargs)
        self.kept, self.positions, self.metas = [], [], []

    def backward(self, inputs, gys, create):
        """The gradients of the block's inputs, recomputing it; differentiable when
        ``create`` (the engine's ``create_graph``)."""
        stand_ins = []
        for x in inputs:
            s = Variable(x.data, requires_grad=True)
            s.generation = x.generation + 1
            stand_ins.append(s)
        subst = Substitute({id(x): s for x, s in zip(inputs, stand_ins)})
        hooks = (subst,) + tuple(h for h in get_config().function_hooks
                                 if not hasattr(h, "for_recompute"))
        hooks += tuple(h.for_recompute() for h in self.replay)
        if self.kept:
            hooks += (Replay(self.kept, self.policy),)
        buffers = snapshot_buffers(self.modules)
        try:
            with using_config("function_hooks", hooks), using_config("train", self.train), \
                    using_config("use_numba", self.use_numba), enable_grad(), \
                    replaying(self.rng):
                out = self.fn(*self.args, **self.kwargs)
        finally:
            restore_buffers(buffers)
        flat = flatten(out, [])
        self._check_recomputed(flat)
        ys = [subst.mapping.get(id(flat[i]), flat[i]) for i in self.positions]
        pairs = [(y, g) for y, g in zip(ys, gys) if y.requires_grad]
        if not pairs:
            return (None,) * len(inputs)
        grads = grad([y for y, _ in pairs], stand_ins, [g for _, g in pairs],
                     create_graph=create, allow_unused=True)
        if create:
            _relink(stand_ins, inputs)
        return grads

    def _check_recomputed(self, flat):
        """RuntimeError unless the recomputation returned what the forward did: a Variable
        of the same shape and dtype at each differentiable position (the gradients that
        arrive were made for those, and the operators' backward kernels rely on it)."""
        got = [(flat[i].shape, flat[i].dtype) if i < len(flat) and isinstance(flat[i], Variable)
               else None for i in self.positions]
        if got != self.metas:
            raise RuntimeError(f"checkpoint: the recomputation returned {got} where the "
                               f"forward returned {self.metas} (shape, dtype); a "
                               "checkpointed block must compute the same outputs each time")


def flatten(out, acc):
    """Leaves of nested tuples/lists/dicts, in order (Variables and everything else)."""
    if isinstance(out, (tuple, list)):
        for o in out:
            flatten(o, acc)
    elif isinstance(out, dict):
        for o in out.values():
            flatten(o, acc)
    else:
        acc.append(out)
    return acc


def rebuild(out, leaves):
    """``out``'s structure with its leaves taken in order from the iterator ``leaves``."""
    if isinstance(out, (tuple, list)):
        items = [rebuild(o, leaves) for o in out]
        return type(out)(*items) if hasattr(out, "_fields") else type(out)(items)
    if isinstance(out, dict):
        return type(out)((k, rebuild(v, leaves)) for k, v in out.items())
    return next(leaves)


def is_float(v):
    return v.dtype.kind == "f" or v.dtype.name == "bfloat16"
