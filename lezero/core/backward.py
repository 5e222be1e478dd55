"""The backward engine: ``backward`` (accumulate into ``.grad``) and ``grad`` (return grads).

One pass runs in three phases:

1. **seed**: the starting gradients (ones, or the caller's ``grad_outputs``);
2. **propagate**: Functions are visited latest-generation first from a heap, which is a
   correct order for any DAG (every consumer of a Variable runs before its creator);
3. **finish**: leaves get their total (hooks, ``.grad``, post-accumulate hooks).

The engine chooses each Function's backward: a first-order pass calls its
``backward_arrays`` (raw arrays, no graph) where it has one, else ``backward`` with graph
recording off; ``create_graph`` always calls ``backward`` with recording on.

A leaf with post-accumulate hooks asks to be told the moment its gradient is complete
(data parallelism starts a bucket's allreduce there): the first time a pass reaches one,
it counts the uses still to come of every leaf (``_uses_to_come``), and from then on
each leaf finishes at its last use.  A pass that reaches no such leaf never counts.

The pass runs Python for every Function, so its per-Function cost is what small operators
pay: a plain ``.backward()`` of one Function on distinct leaves (``(a + b).backward()``)
runs without the phases above (``_backward_leaves``: seed, one backward, accumulate), and
the common cases (one seed, one output, a gradient Variable of the right shape) take the
first branch of each test.
"""
import heapq

from lezero import cuda
from lezero.core.config import get_config, pop_setting, push_setting
from lezero.core.function import Function
from lezero.core.inputref import InputRef, free_saved
from lezero.core.variable import Variable
from lezero.cuda import as_array
from lezero.grad_sum import add_grads


def backward(outputs, grad_outputs=None, retain_grad=False, create_graph=False,
             retain_graph=None):
    """Accumulate d(outputs)/d(leaf) into every leaf's ``.grad``.  The graph's saved
    arrays are freed as the pass uses them unless ``retain_graph`` (default:
    ``create_graph``), as in PyTorch."""
    _run(_as_list(outputs), grad_outputs, retain_grad, create_graph, None, retain_graph)


def grad(outputs, inputs, grad_outputs=None, create_graph=False, allow_unused=False,
         retain_graph=None):
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
    found = _run(_as_list(outputs), grad_outputs, False, create_graph, set(inputs),
                 retain_graph)
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
    return add_grads(total, g)              # in place when the pass alone holds total


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
    return _count_uses([y.creator for y in outputs if y.creator is not None], set(), {})


def _count_uses(stack, seen, uses):
    """Add to ``uses`` the recorded leaf uses of the Functions behind ``stack`` that are
    not in ``seen``."""
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


def _uses_to_come(f, heap, queued):
    """{leaf: uses still to come}, counted when a pass first reaches a leaf with
    post-accumulate hooks, given a gradient by ``f``: the uses by ``f``, by the queued
    Functions and by those behind them (none has run yet).  A leaf that ``f`` already gave
    a gradient counts one use too many, so it finishes at the end of the pass (it has no
    post hook: this is the first such leaf reached)."""
    stack = [entry[2] for entry in heap] + [f]
    return _count_uses(stack, queued.difference(stack), {})


# ----- phase 2: propagate ------------------------------------------------------------------

def _apply_hooks(x, g):
    for hook in x._hooks:
        out = hook(g)
        if out is not None:
            g = out if isinstance(out, Variable) else Variable(out, requires_grad=False)
    return g


def _call_backward(f, gys, hooks, arrays=True):
    """Run ``f.backward_arrays`` when ``arrays`` (first order) and ``f`` has one, else
    ``f.backward`` (with function hooks); check the gradients' count and shapes and
    return one gradient Variable or None per input."""
    for h in hooks:
        h.backward_preprocess(f, gys)
    on_arrays = f.backward_arrays if arrays else None
    gxs = f.backward(*gys) if on_arrays is None else on_arrays(*[g.data for g in gys])
    for h in hooks:
        h.backward_postprocess(f, gys)
    if type(gxs) is not tuple:
        gxs = (gxs,)
    inputs, name = f.inputs, "backward" if on_arrays is None else "backward_arrays"
    if len(gxs) != len(inputs):
        raise ValueError(f"{type(f).__name__}.{name} returned {len(gxs)} gradients "
                         f"for {len(inputs)} inputs")
    out = []
    for x, gx, needed in zip(inputs, gxs, f.needs_input_grad):
        if gx is None or not needed:
            out.append(None)
            continue
        if not isinstance(gx, Variable):
            gx = Variable(as_array(gx), requires_grad=False)
        if gx.data.shape != getattr(x.data if type(x) is Variable else x, "shape", gx.shape):
            raise ValueError(f"{type(f).__name__}.{name} returned a gradient of "
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
    leaves (``(a + b).backward()``, a tiny operator's cost): each leaf's gradient is
    complete as soon as ``f`` returns it, so no heap, no ``_Pass`` and no counting."""
    token = push_setting("enable_backprop", False)
    try:
        seed = y.data.copy()            # copy + fill: several times faster than ones_like()
        seed.fill(1)
        gxs = _call_backward(f, [Variable(seed, None, False)], get_config().function_hooks)
        claimed = set()
        for x, gx in zip(f.inputs, gxs):
            if gx is not None:
                if x._hooks:
                    gx = _apply_hooks(x, gx)
                _accumulate(x, gx, claimed)
                if x._post_hooks:
                    for hook in list(x._post_hooks):
                        hook(x)
    finally:
        pop_setting(token)


class _Pass:
    """What one backward pass carries between its phases: ``grads`` holds the gradient
    summed so far of each Variable still to be processed (after ``propagate``, of the
    leaves still to finish)."""

    __slots__ = ("grads", "retain_grad", "create_graph", "wanted", "found", "hooks", "claimed",
                 "free")

    def __init__(self, outputs, grad_outputs, retain_grad, create_graph, wanted, hooks, free):
        self.grads = _seed(outputs, grad_outputs)
        self.retain_grad, self.create_graph, self.wanted = retain_grad, create_graph, wanted
        self.free = free            # drop each Function's saved arrays once it has run
        self.found, self.hooks = {}, hooks
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
            xp = cuda.get_array_module(next(g for g in gys if g is not None).data)
            for i in missing:              # an output that received no gradient: zeros
                gys[i] = Variable(xp.zeros(*f.output_meta[i]), requires_grad=False)
        return gys

    def propagate(self, outputs):
        """Visit every Function behind ``outputs`` once, latest generation first."""
        # uses: {leaf: uses still to come}, once a leaf with post hooks asks for it
        # arrays: the types free_saved drops, asked once a pass
        grads, uses, heap, queued, arrays = self.grads, None, [], set(), cuda.array_types()

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
            if f.freed:
                raise RuntimeError(f"backward: {type(f).__name__} was already differentiated "
                                   "and freed what it kept; pass retain_graph=True to the "
                                   "first backward to go through the graph again")
            gxs = _call_backward(f, gys, self.hooks, not self.create_graph)
            inputs = list(f.inputs) if self.free else f.inputs
            if self.free:
                free_saved(f, arrays)
            for x, gx in zip(inputs, gxs):
                if gx is None:
                    continue
                if type(x) is InputRef:
                    x = x.variable()
                total = grads.get(x)
                total = gx if total is None else _add(total, gx)
                if x.creator is not None:
                    grads[x] = total
                    enqueue(x.creator)
                    continue
                if x._post_hooks and uses is None and self.wanted is None:
                    uses = _uses_to_come(f, heap, queued)
                if uses is not None and uses[x] == 1:     # a leaf's last use: complete
                    grads.pop(x, None)
                    self.finish_leaf(x, total)
                else:
                    if uses is not None:
                        uses[x] -= 1
                    grads[x] = total
            # the loop's names would keep this Function's gradients alive through the next
            # one's backward (a checkpointed block recomputes there)
            gys = gxs = inputs = x = gx = total = None

    def finish(self):
        """Leaves that were outputs themselves, or never completed, get their total."""
        for x, g in self.grads.items():
            self.finish_leaf(x, g)


def _run(outputs, grad_outputs, retain_grad, create_graph, wanted, retain_graph=None):
    y = outputs[0]
    f = y.creator if isinstance(y, Variable) else None
    # One Function on distinct leaves (generation 0: a Function's outputs have generation
    # >= 1), a plain first-order .backward(), no hook on y: the tiny-operator path.
    if (f is not None and f.generation == 0 and len(outputs) == 1 and len(f.outputs) == 1
            and grad_outputs is None and wanted is None and y.requires_grad
            and not (retain_grad or create_graph or y._hooks)
            and len(set(f.inputs)) == len(f.inputs)):
        return _backward_leaves(f, y)
    token = push_setting("enable_backprop", bool(create_graph))
    try:
        retain = create_graph if retain_graph is None else retain_graph
        state = _Pass(outputs, grad_outputs, retain_grad, create_graph, wanted,
                      get_config().function_hooks, not retain)
        state.propagate(outputs)
        if state.grads:
            state.finish()
        return state.found
    finally:
        pop_setting(token)
