"""The backward engine: ``backward`` (accumulate into ``.grad``) and ``grad`` (return grads).

1. A first walk over the graph counts how many recorded uses each leaf has, so a leaf's
   gradient is known to be complete the moment its last use is processed (its hooks and
   post-accumulate hooks run then: data parallelism starts a bucket's allreduce there).
2. Functions are then visited latest-generation first from a heap, which is a correct
   order for any DAG: every consumer of a Variable runs before that Variable's creator.
Gradients are Variables.  Unless ``create_graph`` is set, they are computed with graph
recording off, so first-order training builds no extra graph.
"""
import heapq

from lezero import cuda
from lezero.core.config import _current, get_config
from lezero.core.variable import Variable, _HookHandle, as_array


def backward(outputs, grad_outputs=None, retain_grad=False, create_graph=False):
    """Accumulate d(outputs)/d(leaf) into every leaf's ``.grad``."""
    _run(_as_list(outputs, "outputs"), grad_outputs, retain_grad, create_graph, wanted=None)


def grad(outputs, inputs, grad_outputs=None, create_graph=False, allow_unused=False):
    """Return the gradients of ``outputs`` with respect to ``inputs`` as a tuple.

    ``.grad`` attributes are left untouched.  ``grad_outputs`` may be arrays or
    Variables (default: ones).  An input that the outputs do not depend on raises
    ``ValueError`` unless ``allow_unused=True``, which gives None for it.
    """
    outputs = _as_list(outputs, "outputs")
    inputs = _as_list(inputs, "inputs")
    grad_outputs = None if grad_outputs is None else _as_list(grad_outputs, "grad_outputs")
    for i, x in enumerate(inputs):
        if not isinstance(x, Variable):
            raise TypeError(f"grad: inputs[{i}] must be a Variable, got {type(x).__name__}")
    found = _run(outputs, grad_outputs, False, create_graph, wanted=set(inputs))
    result = []
    for i, x in enumerate(inputs):
        g = found.get(x)
        if g is None and not allow_unused:
            raise ValueError(f"grad: inputs[{i}] (shape {x.shape}) is not used to compute "
                             "the outputs; pass allow_unused=True to get None for it")
        result.append(g)
    return tuple(result)


def _as_list(xs, what):
    if isinstance(xs, (list, tuple)):
        return list(xs)
    return [xs]


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
            d = y.data
            ones = cuda.get_array_module(d).empty(d.shape, d.dtype)
            ones.fill(1)                  # empty + fill: several times faster than ones()
            g = Variable(ones, requires_grad=False)
            if len(outputs) == 1:
                return {y: g}
        elif not isinstance(g, Variable):
            g = Variable(as_array(g, y.data), requires_grad=False)
        if g.data.shape != y.data.shape:
            raise ValueError(f"backward: grad_outputs[{i}] has shape {g.shape} but "
                             f"outputs[{i}] has shape {y.shape}")
        seeds[y] = _add(seeds.get(y), g)
    return seeds


def _count_leaf_uses(outputs):
    """Walk the graph once; return {leaf: number of recorded uses}."""
    uses = {}
    seen = set()
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


def _add(total, g):
    if total is None:
        return g
    if get_config().enable_backprop:        # create_graph: keep the sum differentiable
        return total + g
    return Variable(total.data + g.data, requires_grad=False)


def _apply_hooks(x, g):
    for hook in x._hooks:
        out = hook(g)
        if out is not None:
            g = out if isinstance(out, Variable) else Variable(out, requires_grad=False)
    return g


def _root(a):
    """The array that owns ``a``'s memory."""
    while a.base is not None:
        a = a.base
    return a


def _finish_leaf(x, g, create_graph, wanted, found, claimed):
    """A leaf's gradient is complete: run its hooks, then store or accumulate it."""
    if x._hooks:
        g = _apply_hooks(x, g)
    if wanted is not None:
        if x in wanted:
            found[x] = g
        return
    if create_graph:
        x.grad = g if x.grad is None else x.grad + g
    elif x.grad is None:
        # .grad must own writable memory: optimizers and clipping update it in place,
        # and a gradient may be a broadcast view, the caller's seed, or shared by leaves.
        d = g.data
        if d.base is None and id(d) not in claimed:       # a fresh array: take it as is
            claimed.add(id(d))
        else:
            root = _root(d)               # views share memory with their root array
            if id(root) in claimed or not getattr(d.flags, "writeable", True):
                d = d.copy()
                g = Variable(d, requires_grad=False)
                root = d
            claimed.add(id(root))
        x.grad = g
    else:
        x.grad.data += g.data
    if x._post_hooks:
        for hook in list(x._post_hooks):
            hook(x)


def _take_grad(y, grads, retain_grad, wanted, found):
    """Pop the complete gradient of output ``y`` (None if it got none) and run its hooks."""
    g = None if y is None else grads.pop(y, None)
    if g is not None:
        if y._hooks:
            g = _apply_hooks(y, g)
        if retain_grad:
            y.grad = g
        if wanted is not None and y in wanted:
            found[y] = g
    return g


def _output_grads(f, grads, retain_grad, wanted, found):
    """Collect (and release) the gradients of ``f``'s outputs, zero-filling missing ones.

    Returns None when no output received a gradient (nothing to propagate)."""
    outs = f.outputs
    gys = [_take_grad(ref(), grads, retain_grad, wanted, found) for ref in outs]
    if len(gys) == 1:                  # the common case
        return None if gys[0] is None else gys
    if all(g is None for g in gys):
        return None
    for i, g in enumerate(gys):
        if g is None:                  # an output that received no gradient: zeros
            shape, dtype = f._output_meta[i]
            xp = cuda.get_array_module(f.inputs[0].data)
            gys[i] = Variable(xp.zeros(shape, dtype), requires_grad=False)
    return gys


def _call_backward(f, gys):
    """Run ``f.backward`` (with function hooks) and normalise its result to a tuple."""
    hooks = get_config().function_hooks
    if not hooks:
        gxs = f.backward(*gys)
    else:
        for h in hooks:
            h.backward_preprocess(f, gys)
        gxs = f.backward(*gys)
        for h in hooks:
            h.backward_postprocess(f, gys)
    if not isinstance(gxs, tuple):
        gxs = (gxs,)
    if len(gxs) != len(f.inputs):
        raise ValueError(f"{type(f).__name__}.backward returned {len(gxs)} gradients "
                         f"for {len(f.inputs)} inputs")
    return gxs


def _run(outputs, grad_outputs, retain_grad, create_graph, wanted):
    token = _current.set(get_config().replace("enable_backprop", bool(create_graph)))
    try:
        grads = _seed(outputs, grad_outputs)
        # Caller-given gradients must be copied before they become some leaf's .grad.
        claimed = set() if grad_outputs is None else {id(_root(g.data)) for g in grads.values()}
        leaves = {y: None for y in outputs if y.creator is None}
        # Counting leaf uses lets hooks run the moment a leaf's gradient is complete.
        # With no hook registered anywhere, finishing every leaf at the end is the same.
        uses = _count_leaf_uses(outputs) if _HookHandle.live else None
        found = {}
        heap, counter, queued = [], 0, set()
        push, pop = heapq.heappush, heapq.heappop
        for y in outputs:
            f = y.creator
            if f is not None and f not in queued:
                queued.add(f)
                push(heap, (-f.generation, counter, f))
                counter += 1

        while heap:
            f = pop(heap)[2]
            gys = _output_grads(f, grads, retain_grad, wanted, found)
            if gys is None:
                continue
            gxs = _call_backward(f, gys)
            for x, gx, needed in zip(f.inputs, gxs, f.needs_input_grad):
                if gx is None or not needed:
                    continue
                if type(gx) is not Variable and not isinstance(gx, Variable):
                    gx = Variable(as_array(gx), requires_grad=False)
                if gx.data.shape != x.data.shape:
                    raise ValueError(f"{type(f).__name__}.backward returned a gradient of "
                                     f"shape {gx.shape} for an input of shape {x.shape}")
                creator = x.creator
                if creator is None:
                    left = uses[x] - 1 if uses is not None else -1
                    if uses is not None:
                        uses[x] = left
                    prev = grads.pop(x, None)
                    total = gx if prev is None else _add(prev, gx)
                    if left == 0:         # the leaf's last use: its gradient is complete
                        _finish_leaf(x, total, create_graph, wanted, found, claimed)
                    else:
                        grads[x] = total
                        leaves[x] = None
                    continue
                prev = grads.get(x)
                grads[x] = gx if prev is None else _add(prev, gx)
                if creator not in queued:
                    queued.add(creator)
                    push(heap, (-creator.generation, counter, creator))
                    counter += 1

        for x in leaves:   # leaves that were outputs themselves, or never completed
            if x in grads:
                _finish_leaf(x, grads.pop(x), create_graph, wanted, found, claimed)
        return found
    finally:
        _current.reset(token)
