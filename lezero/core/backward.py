"""The backward engine: ``backward`` (accumulate into ``.grad``) and ``grad`` (return grads).

One pass runs in three phases:

1. **seed**: the starting gradients (ones, or the caller's ``grad_outputs``), and, when any
   hook is registered, a count of each leaf's recorded uses, so that a leaf's gradient is
   known complete the moment its last use is processed (its hooks and post-accumulate
   hooks run then: data parallelism starts a bucket's allreduce there);
2. **propagate**: Functions are visited latest-generation first from a heap, which is a
   correct order for any DAG (every consumer of a Variable runs before its creator);
3. **finish**: leaves that were outputs themselves, or never completed, get their total.

Gradients are Variables.  Unless ``create_graph`` is set they are computed with graph
recording off, so first-order training builds no extra graph.
"""
import heapq

from lezero import cuda
from lezero.core.config import get_config, pop_setting, push_setting
from lezero.core.function import Function
from lezero.core.variable import Variable, as_array, live_hook_count


def backward(outputs, grad_outputs=None, retain_grad=False, create_graph=False):
    """Accumulate d(outputs)/d(leaf) into every leaf's ``.grad``."""
    _run(_as_list(outputs), grad_outputs, retain_grad, create_graph, wanted=None)


def grad(outputs, inputs, grad_outputs=None, create_graph=False, allow_unused=False):
    """Return the gradients of ``outputs`` with respect to ``inputs`` as a tuple.

    ``.grad`` attributes are left untouched.  ``grad_outputs`` may be arrays or
    Variables (default: ones).  An input that the outputs do not depend on raises
    ``ValueError`` unless ``allow_unused=True``, which gives None for it.
    """
    inputs = _as_list(inputs)
    for i, x in enumerate(inputs):
        if not isinstance(x, Variable):
            raise TypeError(f"grad: inputs[{i}] must be a Variable, got {type(x).__name__}")
    grad_outputs = None if grad_outputs is None else _as_list(grad_outputs)
    found = _run(_as_list(outputs), grad_outputs, False, create_graph, wanted=set(inputs))
    result = []
    for i, x in enumerate(inputs):
        g = found.get(x)
        if g is None and not allow_unused:
            raise ValueError(f"grad: inputs[{i}] (shape {x.shape}) is not used to compute "
                             "the outputs; pass allow_unused=True to get None for it")
        result.append(g)
    return tuple(result)


class Accumulate(Function):
    """``a + b`` for two gradients of one Variable: the one operator the engine itself
    needs (to sum gradients under ``create_graph``), so the core runs on its own."""

    def forward(self, a, b):
        return a + b

    def backward(self, gy):
        return gy, gy


def _as_list(xs):
    return list(xs) if isinstance(xs, (list, tuple)) else [xs]


def _add(total, g):
    if total is None:
        return g
    if get_config().enable_backprop:        # create_graph: keep the sum differentiable
        return Accumulate()(total, g)
    return Variable(total.data + g.data, requires_grad=False)


# ----- phase 1: seed -----------------------------------------------------------------------

def _seed(outputs, grad_outputs):
    """The starting gradients: ones, or the given ``grad_outputs`` checked for shape."""
    if grad_outputs is not None and len(grad_outputs) != len(outputs):
        raise ValueError(f"backward: got {len(grad_outputs)} grad_outputs for "
                         f"{len(outputs)} outputs")
    seeds = {}
    for i, y in enumerate(outputs):
        if not isinstance(y, Variable):
            raise TypeError(f"backward: outputs[{i}] must be a Variable, got {type(y).__name__}")
        if not y.requires_grad:
            raise ValueError(f"backward: outputs[{i}] does not require grad (it was computed "
                             "from constants only, or under no_grad)")
        g = None if grad_outputs is None else grad_outputs[i]
        if g is None:
            ones = cuda.get_array_module(y.data).empty_like(y.data)
            ones.fill(1)                  # empty + fill: several times faster than ones()
            g = Variable(ones, requires_grad=False)
        elif not isinstance(g, Variable):
            g = Variable(as_array(g, y.data), requires_grad=False)
        if g.data.shape != y.data.shape:
            raise ValueError(f"backward: grad_outputs[{i}] has shape {g.shape} but "
                             f"outputs[{i}] has shape {y.shape}")
        seeds[y] = _add(seeds.get(y), g)
    return seeds


def count_leaf_uses(outputs):
    """Walk the graph behind ``outputs`` once; return {leaf: number of recorded uses}
    (the leaves a backward from them reaches; data parallelism reads it too)."""
    uses, seen = {}, set()
    stack = [y.creator for y in outputs if y.creator is not None]
    while stack:
        f = stack.pop()
        if f in seen:
            continue
        seen.add(f)
        for x, needed in zip(f.inputs, f.needs_input_grad):
            if needed:
                if x.creator is None:
                    uses[x] = uses.get(x, 0) + 1
                else:
                    stack.append(x.creator)
    return uses


# ----- phase 2: propagate ------------------------------------------------------------------

def _apply_hooks(x, g):
    for hook in x._hooks:
        out = hook(g)
        if out is not None:
            g = out if isinstance(out, Variable) else Variable(out, requires_grad=False)
    return g


def _call_backward(f, gys, hooks):
    """Run ``f.backward`` (with function hooks) and check its gradients' count and shapes;
    returns one gradient Variable or None per input."""
    for h in hooks:
        h.backward_preprocess(f, gys)
    gxs = f.backward(*gys)
    for h in hooks:
        h.backward_postprocess(f, gys)
    gxs = gxs if type(gxs) is tuple else (gxs,)
    if len(gxs) != len(f.inputs):
        raise ValueError(f"{type(f).__name__}.backward returned {len(gxs)} gradients "
                         f"for {len(f.inputs)} inputs")
    out = []
    for x, gx, needed in zip(f.inputs, gxs, f.needs_input_grad):
        if gx is not None and needed:
            if not isinstance(gx, Variable):
                gx = Variable(as_array(gx), requires_grad=False)
            if gx.data.shape != x.data.shape:
                raise ValueError(f"{type(f).__name__}.backward returned a gradient of "
                                 f"shape {gx.shape} for an input of shape {x.shape}")
        out.append(gx if needed else None)
    return out


# ----- the pass: propagate, then finish leaves ----------------------------------------------

def _root(a):
    """The array that owns ``a``'s memory."""
    while a.base is not None:
        a = a.base
    return a


class _Pass:
    """What one backward pass carries between its phases."""

    def __init__(self, outputs, grad_outputs, retain_grad, create_graph, wanted):
        self.grads = _seed(outputs, grad_outputs)
        self.retain_grad, self.create_graph, self.wanted = retain_grad, create_graph, wanted
        self.found, self.hooks = {}, get_config().function_hooks
        self.leaves = {y: None for y in outputs if y.creator is None}
        # With no hook registered anywhere, finishing every leaf at the end is the same.
        self.uses = count_leaf_uses(outputs) if live_hook_count() else None
        # Caller-given gradients must be copied before they become some leaf's .grad.
        self.claimed = (set() if grad_outputs is None
                        else {id(_root(g.data)) for g in self.grads.values()})

    def finish_leaf(self, x, g):
        """A leaf's gradient is complete: run its hooks, then store or accumulate it."""
        if x._hooks:
            g = _apply_hooks(x, g)
        if self.wanted is not None:
            if x in self.wanted:
                self.found[x] = g
            return
        if self.create_graph:
            x.grad = g if x.grad is None else x.grad + g
        elif x.grad is None:
            x.grad = self._owned(g)
        elif g.data.size == 1:
            # NumPy's in-place add costs about three times more for one element than for
            # two (0.8 against 0.27 us, numpy 2.4): scalar parameters (PReLU's) pay it.
            x.grad.data[...] = x.grad.data + g.data
        else:
            x.grad.data += g.data
        if x._post_hooks:
            for hook in list(x._post_hooks):
                hook(x)

    def _owned(self, g):
        """``g``, copied unless its memory is fresh and writable: optimizers and clipping
        update ``.grad`` in place, and a gradient may be a broadcast view, the caller's
        seed, or shared by several leaves."""
        d = g.data
        if d.base is None and id(d) not in self.claimed:
            self.claimed.add(id(d))
            return g
        root = _root(d)
        if id(root) in self.claimed or not getattr(d.flags, "writeable", True):
            d = d.copy()
            g, root = Variable(d, requires_grad=False), d
        self.claimed.add(id(root))
        return g

    def output_grads(self, f):
        """Pop the complete gradients of ``f``'s outputs (running their hooks), zero-filling
        outputs that got none; None when no output got one (nothing to propagate)."""
        gys, missing = [], []
        for ref in f.outputs:
            y = ref()
            g = None if y is None else self.grads.pop(y, None)
            if g is None:
                missing.append(len(gys))
            else:
                if y._hooks:
                    g = _apply_hooks(y, g)
                if self.retain_grad:
                    y.grad = g
                if self.wanted is not None and y in self.wanted:
                    self.found[y] = g
            gys.append(g)
        if len(missing) == len(gys):
            return None
        for i in missing:              # an output that received no gradient: zeros
            shape, dtype = f.output_meta[i]
            xp = cuda.get_array_module(f.inputs[0].data)
            gys[i] = Variable(xp.zeros(shape, dtype), requires_grad=False)
        return gys

    def propagate(self, outputs):
        """Visit every Function behind ``outputs`` once, latest generation first."""
        f = outputs[0].creator
        if len(outputs) == 1 and f is not None and self.uses is None and all(
                [x.creator is None for x in f.inputs]):
            # One Function on leaves, no Variable hooks: nothing to order or to hold back;
            # a leaf used twice simply accumulates twice.
            for x, gx in zip(f.inputs, _call_backward(f, self.output_grads(f), self.hooks)):
                if gx is not None:
                    self.finish_leaf(x, gx)
            return
        grads, uses, leaves, heap, queued = self.grads, self.uses, self.leaves, [], set()
        for f in [y.creator for y in outputs if y.creator is not None]:
            if f not in queued:
                queued.add(f)
                heapq.heappush(heap, (-f.generation, len(queued), f))
        while heap:
            f = heapq.heappop(heap)[2]
            gys = self.output_grads(f)
            if gys is None:
                continue
            for x, gx in zip(f.inputs, _call_backward(f, gys, self.hooks)):
                if gx is None:
                    continue
                total = _add(grads.pop(x, None), gx)
                creator = x.creator
                if creator is not None:
                    grads[x] = total
                    if creator not in queued:
                        queued.add(creator)
                        heapq.heappush(heap, (-creator.generation, len(queued), creator))
                elif uses is not None and uses[x] == 1:   # a leaf's last use: complete
                    self.finish_leaf(x, total)
                else:
                    if uses is not None:
                        uses[x] -= 1
                    grads[x] = total
                    leaves[x] = None

    def finish(self):
        for x in self.leaves:     # leaves that were outputs themselves, or never completed
            if x in self.grads:
                self.finish_leaf(x, self.grads.pop(x))
        return self.found


def _run(outputs, grad_outputs, retain_grad, create_graph, wanted):
    token = push_setting("enable_backprop", bool(create_graph))
    try:
        state = _Pass(outputs, grad_outputs, retain_grad, create_graph, wanted)
        state.propagate(outputs)
        return state.finish()
    finally:
        pop_setting(token)
