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

The pass runs Python for every Function, so its per-Function cost is what small operators
pay: a plain ``.backward()`` of one Function on distinct leaves with no hook registered
(``(a + b).backward()``) runs without the phases above (``_backward_leaves``: seed, one
backward, accumulate), and the common cases (one seed, one output, a gradient Variable of
the right shape) take the first branch of each test.
"""
import heapq

from lezero import cuda
from lezero.core.config import get_config, pop_setting, push_setting
from lezero.core.function import Function
from lezero.core.variable import Variable, live_hook_count
from lezero.cuda import as_array


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
    for i, x in enumerate(inputs):
        if x not in found and not allow_unused:
            raise ValueError(f"grad: inputs[{i}] (shape {x.shape}) is not used to compute "
                             "the outputs; pass allow_unused=True to get None for it")
    return tuple(found.get(x) for x in inputs)


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
    if get_config().enable_backprop:        # create_graph: keep the sum differentiable
        return Accumulate()(total, g)
    return Variable(total.data + g.data, None, False)     # positional: faster than keywords


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
            g = y.data.copy()           # copy + fill: several times faster than ones_like()
            g.fill(1)
            g = Variable(g, None, False)
        else:
            if not isinstance(g, Variable):
                g = Variable(as_array(g, y.data), requires_grad=False)
            if g.data.shape != y.data.shape:
                raise ValueError(f"backward: grad_outputs[{i}] has shape {g.shape} but "
                                 f"outputs[{i}] has shape {y.shape}")
        seeds[y] = _add(seeds[y], g) if y in seeds else g
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
    if type(gxs) is not tuple:
        gxs = (gxs,)
    inputs = f.inputs
    if len(gxs) != len(inputs):
        raise ValueError(f"{type(f).__name__}.backward returned {len(gxs)} gradients "
                         f"for {len(inputs)} inputs")
    out = []
    for x, gx, needed in zip(inputs, gxs, f.needs_input_grad):
        if gx is None or not needed:
            out.append(None)
            continue
        if not isinstance(gx, Variable):
            gx = Variable(as_array(gx), requires_grad=False)
        if gx.data.shape != x.data.shape:
            raise ValueError(f"{type(f).__name__}.backward returned a gradient of "
                             f"shape {gx.shape} for an input of shape {x.shape}")
        out.append(gx)
    return out


# ----- the pass: propagate, then finish leaves ----------------------------------------------

def _root(a):
    """The array that owns ``a``'s memory."""
    while a.base is not None:
        a = a.base
    return a


def _accumulate(x, g, claimed):
    """Add the first-order gradient ``g`` into leaf ``x``'s ``.grad``, in place once it
    exists; ``claimed`` holds the memory (ids of root arrays) already given to a leaf."""
    old = x.grad
    if old is None:
        # Copy unless the memory is fresh and writable: optimizers and clipping update
        # .grad in place, and a gradient may be a broadcast view, the caller's seed, or
        # shared by several leaves.
        d = g.data
        root = _root(d)
        if id(root) in claimed or not getattr(d.flags, "writeable", True):
            d = d.copy()
            g, root = Variable(d, None, False), d
        claimed.add(id(root))
        x.grad = g
    elif g.data.size == 1:
        # NumPy's in-place add of one element costs 5x a fill with the sum of the two
        # Python numbers (0.94 against 0.18 us, numpy 2.4); the sum of two float32s
        # rounded once from float64 is the float32 sum.  Scalar parameters pay it.
        old.data.fill(old.data.item() + g.data.item())
    else:
        old.data += g.data


def _backward_leaves(f, y):
    """The whole pass when ``y`` is the only output of one Function ``f`` on distinct
    leaves and no Variable hook exists (``(a + b).backward()``, a tiny operator's cost):
    nothing to order, hold back or count, so no heap and no ``_Pass``."""
    token = push_setting("enable_backprop", False)
    try:
        seed = y.data.copy()            # copy + fill: several times faster than ones_like()
        seed.fill(1)
        gxs = _call_backward(f, [Variable(seed, None, False)], get_config().function_hooks)
        claimed = set()
        for x, gx in zip(f.inputs, gxs):
            if gx is not None:
                _accumulate(x, gx, claimed)
    finally:
        pop_setting(token)


class _Pass:
    """What one backward pass carries between its phases: ``grads`` holds the gradient
    summed so far of each Variable still to be processed (after ``propagate``, of the
    leaves still to finish)."""

    __slots__ = ("grads", "retain_grad", "create_graph", "wanted", "found", "hooks", "uses",
                 "claimed")

    def __init__(self, outputs, grad_outputs, retain_grad, create_graph, wanted, hooks):
        self.grads = _seed(outputs, grad_outputs)
        self.retain_grad, self.create_graph, self.wanted = retain_grad, create_graph, wanted
        self.found, self.hooks = {}, hooks
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
        if not self.create_graph:
            _accumulate(x, g, self.claimed)
        else:
            x.grad = g if x.grad is None else x.grad + g
        if x._post_hooks:
            for hook in list(x._post_hooks):
                hook(x)

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
        if missing:
            if len(missing) == len(gys):
                return None
            for i in missing:              # an output that received no gradient: zeros
                shape, dtype = f.output_meta[i]
                xp = cuda.get_array_module(f.inputs[0].data)
                gys[i] = Variable(xp.zeros(shape, dtype), requires_grad=False)
        return gys

    def propagate(self, outputs):
        """Visit every Function behind ``outputs`` once, latest generation first."""
        grads, uses, heap, queued = self.grads, self.uses, [], set()

        def enqueue(f):     # the queue order: latest generation first, then first queued
            if f is not None and f not in queued:
                queued.add(f)
                heapq.heappush(heap, (-f.generation, len(queued), f))
        for y in outputs:
            enqueue(y.creator)
        while heap:
            f = heapq.heappop(heap)[2]
            gys = self.output_grads(f)
            if gys is None:
                continue
            for x, gx in zip(f.inputs, _call_backward(f, gys, self.hooks)):
                if gx is None:
                    continue
                total = grads.get(x)
                total = gx if total is None else _add(total, gx)
                if x.creator is not None:
                    grads[x] = total
                    enqueue(x.creator)
                elif uses is not None and uses[x] == 1:   # a leaf's last use: complete
                    grads.pop(x, None)
                    self.finish_leaf(x, total)
                else:
                    if uses is not None:
                        uses[x] -= 1
                    grads[x] = total

    def finish(self):
        """Leaves that were outputs themselves, or never completed, get their total."""
        for x, g in self.grads.items():
            self.finish_leaf(x, g)


def _run(outputs, grad_outputs, retain_grad, create_graph, wanted):
    y = outputs[0]
    f = y.creator if isinstance(y, Variable) else None
    # One Function on distinct leaves (generation 0: a Function's outputs have generation
    # >= 1), a plain first-order .backward() and no hook: the tiny-operator path.
    if (f is not None and f.generation == 0 and len(outputs) == 1 and len(f.outputs) == 1
            and grad_outputs is None and wanted is None and y.requires_grad
            and not (retain_grad or create_graph or live_hook_count())
            and len(set(f.inputs)) == len(f.inputs)):
        return _backward_leaves(f, y)
    token = push_setting("enable_backprop", bool(create_graph))
    try:
        state = _Pass(outputs, grad_outputs, retain_grad, create_graph, wanted,
                      get_config().function_hooks)
        state.propagate(outputs)
        if state.grads:
            state.finish()
        return state.found
    finally:
        pop_setting(token)
