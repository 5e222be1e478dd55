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
from lezero.core.variable import Variable, as_array


def backward(outputs, grad_outputs=None, retain_grad=False, create_graph=False):
    """Accumulate d(outputs)/d(leaf) into every leaf's ``.grad``."""
    _run(outputs, grad_outputs, retain_grad, create_graph, wanted=None)


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
    found = _run(outputs, grad_outputs, False, create_graph, wanted={id(x) for x in inputs})
    result = []
    for i, x in enumerate(inputs):
        g = found.get(id(x))
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
            g = Variable(cuda.get_array_module(y.data).ones_like(y.data), requires_grad=False)
        elif not isinstance(g, Variable):
            g = Variable(as_array(g, y.data), requires_grad=False)
        if g.shape != y.shape:
            raise ValueError(f"backward: grad_outputs[{i}] has shape {g.shape} but "
                             f"outputs[{i}] has shape {y.shape}")
        seeds[id(y)] = _add(seeds.get(id(y)), g)
    return seeds


def _count_leaf_uses(outputs):
    """Walk the graph once; return {id(leaf): number of recorded uses}."""
    uses = {}
    seen = set()
    stack = [y.creator for y in outputs if y.creator is not None]
    while stack:
        f = stack.pop()
        if id(f) in seen:
            continue
        seen.add(id(f))
        for x, needed in zip(f.inputs, f.needs_input_grad):
            if not needed:
                continue
            if x.creator is None:
                uses[id(x)] = uses.get(id(x), 0) + 1
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


def _run(outputs, grad_outputs, retain_grad, create_graph, wanted):
    outputs = _as_list(outputs, "outputs")
    token = _current.set(get_config().replace("enable_backprop", bool(create_graph)))
    try:
        grads = _seed(outputs, grad_outputs)
        leaves = {id(y): y for y in outputs if y.creator is None}
        uses = _count_leaf_uses(outputs)
        found = {}

        def finish_leaf(x):
            g = grads.pop(id(x))
            if x._hooks:
                g = _apply_hooks(x, g)
            if wanted is not None:
                if id(x) in wanted:
                    found[id(x)] = g
                return
            if x.grad is None:
                x.grad = g
            elif create_graph:
                x.grad = x.grad + g
            else:
                x.grad = Variable(x.grad.data + g.data, requires_grad=False)
            if x._post_hooks:
                for hook in list(x._post_hooks):
                    hook(x)

        heap, counter, queued = [], 0, set()
        for y in outputs:
            f = y.creator
            if f is not None and id(f) not in queued:
                queued.add(id(f))
                heapq.heappush(heap, (-f.generation, counter, f))
                counter += 1

        while heap:
            f = heapq.heappop(heap)[2]
            gys = []
            for i, ref in enumerate(f.outputs):
                y = ref()
                g = None if y is None else grads.pop(id(y), None)
                if g is not None:
                    if y._hooks:
                        g = _apply_hooks(y, g)
                    if retain_grad:
                        y.grad = g
                    if wanted is not None and id(y) in wanted:
                        found[id(y)] = g
                elif len(f.outputs) > 1:       # an output that received no gradient: zeros
                    shape, dtype = f._output_meta[i]
                    xp = cuda.get_array_module(f.inputs[0].data)
                    g = Variable(xp.zeros(shape, dtype), requires_grad=False)
                gys.append(g)
            if all(g is None for g in gys):
                continue

            hooks = get_config().function_hooks
            if hooks:
                for h in hooks:
                    h.backward_preprocess(f, gys)
            gxs = f.backward(*gys)
            if hooks:
                for h in hooks:
                    h.backward_postprocess(f, gys)
            if not isinstance(gxs, tuple):
                gxs = (gxs,)
            if len(gxs) != len(f.inputs):
                raise ValueError(f"{type(f).__name__}.backward returned {len(gxs)} gradients "
                                 f"for {len(f.inputs)} inputs")

            for x, gx, needed in zip(f.inputs, gxs, f.needs_input_grad):
                if gx is None or not needed:
                    continue
                if not isinstance(gx, Variable):
                    gx = Variable(as_array(gx), requires_grad=False)
                if gx.shape != x.shape:
                    raise ValueError(f"{type(f).__name__}.backward returned a gradient of "
                                     f"shape {gx.shape} for an input of shape {x.shape}")
                key = id(x)
                grads[key] = _add(grads.get(key), gx)
                if x.creator is None:
                    leaves[key] = x
                    uses[key] -= 1
                    if uses[key] == 0:
                        finish_leaf(x)
                elif id(x.creator) not in queued:
                    queued.add(id(x.creator))
                    heapq.heappush(heap, (-x.creator.generation, counter, x.creator))
                    counter += 1

        for key, x in leaves.items():   # leaves that were outputs themselves, or unfinished
            if key in grads:
                finish_leaf(x)
        return found
    finally:
        _current.reset(token)
