"""Checks that keep a trace honest: what would be frozen silently is found and reported.

* ``check_trace`` runs the function a second time on inputs with other *values* (same
  shapes and dtypes; integers permuted, so indices stay valid, or where that changes
  nothing, as for an all-ones mask, ``(x + 1) % (max + 1)``; booleans then negated) from
  the same random state, and compares the two graphs.  A different operator sequence
  means Python control flow followed the data; a constant, attribute or Variable made
  during the call that changed (a loss target preprocessed in Python, a mask computed
  with NumPy) would be frozen.  Either is a ``TraceError`` naming the node.  Attributes
  that only scale a gradient (``GRADIENT_ONLY``) are not compared.
* ``mark_stochastic`` finds dropout nodes (a ``ScaleShift`` whose scale is a 0 / (1/(1-p))
  mask) and records ``p`` so that replay draws a fresh mask from LeZero's generator per
  call, as eager execution does; any other random scale traced in training mode is an
  error.
* ``check_buffers`` refuses a training-mode trace that updated module buffers in place
  (batch norm's running statistics): a replay would not update them.
"""
import warnings

import numpy as np

from lezero import cuda
from lezero.core import Variable
from lezero.random import get_rng_state, set_rng_state
from lezero.jit import attrs as A
from lezero.jit.errors import TraceError, TracerWarning
from lezero.jit.tracer import is_module, record

__all__ = ["perturb", "GRADIENT_ONLY", "changed_params", "check_trace", "mark_stochastic",
           "buffer_snapshot", "check_buffers", "restore_buffers"]


# Attributes that only scale a gradient (embedding's padding_idx weights): forward and
# replay never read them, so a change with the inputs' values freezes nothing.
GRADIENT_ONLY = frozenset({("Embedding", "use_weight")})


def _other_values(data):
    """An integer or boolean array with other values where possible: rolled by one
    position (a permutation, so indices stay valid); where that changes nothing (an
    all-ones mask, one element), integers ``(x + 1) % (max + 1)`` (still in [0, max]; an
    array with max <= 0 is left as it is) and booleans negated."""
    xp = cuda.get_array_module(data)
    rolled = xp.roll(data.reshape(-1), 1).reshape(data.shape)
    if not bool(xp.array_equal(rolled, data)):
        return rolled
    if data.dtype == np.bool_:
        return ~data
    top = int(data.max())
    if top <= 0:
        return data
    return ((data.astype(np.int64) + 1) % (top + 1)).astype(data.dtype)


def perturb(args):
    """Arguments with different values: floats (of more than one element) shifted and
    scaled, integers and booleans given other values by ``_other_values``, everything else
    unchanged."""
    out = []
    for a in args:
        data = a.data if isinstance(a, Variable) else a
        if not isinstance(data, cuda.array_types()) or data.size == 0:
            out.append(a)
        elif data.dtype.kind in "fc":
            out.append((data * 0.75 + 0.125).astype(data.dtype) if data.size > 1 else a)
        elif data.dtype.kind in "iub":
            out.append(_other_values(data))
        else:
            out.append(a)
    return out


def _first_difference(ops1, ops2):
    for k, (a, b) in enumerate(zip(ops1, ops2)):
        if a != b:
            return k
    return min(len(ops1), len(ops2))


def _compare_outputs(g1, g2):
    for k, (a, b) in enumerate(zip(g1.outputs, g2.outputs)):
        if g1.values[a].kind == "const" and not (
                g2.values[b].kind == "const" and A.attrs_equal(g1.consts[a], g2.consts[b])):
            raise TraceError(f"jit.trace: output {k} is an array computed from the inputs "
                             "outside LeZero operators (it changed with the inputs) and "
                             "would be frozen as a constant")


def changed_params(g1, g2):
    """Names of parameters that are a new Variable in each run with other values: a
    Variable that requires a gradient created *during* the call from the inputs' values
    (``lz.Variable(mask.data != 0)``), which the graph would hold as a weight with this
    run's values.  A module's parameters and Variables made before the call are the same
    object in both runs."""
    return [name for name, v in g1.params.items()
            if name in g2.params and g2.params[name] is not v
            and not A.attrs_equal(v.data, g2.params[name].data)]


def _compare(g1, g2, fn_name):
    ops1, ops2 = [n.op for n in g1.nodes], [n.op for n in g2.nodes]
    if ops1 != ops2:
        k = _first_difference(ops1, ops2)
        a = ops1[k] if k < len(ops1) else "end"
        b = ops2[k] if k < len(ops2) else "end"
        raise TraceError(f"jit.trace: {fn_name} ran different operators when the input "
                         f"values changed (node {k}: {a} vs {b}; {len(ops1)} vs {len(ops2)} "
                         "nodes): its Python control flow depends on the data, so no single "
                         "static graph represents it")
    changed = changed_params(g1, g2)
    if changed:
        raise TraceError(f"jit.trace: %{changed[0]} is a Variable created during the call "
                         "whose values changed with the inputs: it was computed from them "
                         "outside LeZero operators and would be frozen as a weight. Compute "
                         "it with LeZero operators")
    for k, (n1, n2) in enumerate(zip(g1.nodes, g2.nodes)):
        for key in n1.attrs:
            if key.startswith("_") or key not in n2.attrs or (n1.op, key) in GRADIENT_ONLY:
                continue
            if not A.attrs_equal(n1.attrs[key], n2.attrs[key]):
                raise TraceError(
                    f"jit.trace: node {k} ({n1.op}) has an attribute {key!r} that changed "
                    f"when the input values changed: it was computed from the inputs "
                    f"outside LeZero operators and would be frozen. Pass it as an input of "
                    f"the traced function, or compute it with LeZero operators")
        for i, (a, b) in enumerate(zip(n1.inputs, n2.inputs)):
            if g1.values[a].kind == "const" and g2.values[b].kind == "const":
                if not A.attrs_equal(g1.consts[a], g2.consts[b]):
                    raise TraceError(
                        f"jit.trace: input {i} of node {k} ({n1.op}) is an array computed "
                        "from the inputs outside LeZero operators (its values changed with "
                        "the inputs) and would be frozen as a constant")


def check_trace(fn, args, recording, param_names, fn_name, rng_before):
    """Re-run ``fn`` on perturbed inputs from the random state the first run started
    with (``rng_before``), then put the generator back where the first run left it."""
    state = get_rng_state()
    set_rng_state(rng_before)
    try:
        with np.errstate(all="ignore"):     # made-up values may divide by zero: no noise
            other = record(fn, perturb(args), param_names)
    except TraceError:
        raise
    except Exception as e:     # the function refuses other values: skip, but say so
        warnings.warn(f"jit.trace: check_trace skipped: rerunning {fn_name} on perturbed "
                      f"inputs raised {type(e).__name__}: {e}", TracerWarning, stacklevel=4)
        return
    finally:
        set_rng_state(state)
    _compare(recording.graph, other.graph, fn_name)
    _compare_outputs(recording.graph, other.graph)


def _dropout_p(scale, factor=None):
    """p when the scale is dropout's: a bool kept mask with ``factor`` 1/(1-p) (what
    ``F.dropout`` records), or an array of only 0 and 1/(1-p) (with some kept); else None."""
    arr = cuda.as_numpy(scale)
    if arr.size < 2:
        return None
    if factor is not None:
        if arr.dtype != np.bool_ or not factor > 1:
            return None
        c, as_type = float(factor), float
    else:
        if arr.dtype.kind != "f":
            return None
        c, as_type = float(arr.max()), arr.dtype.type
        if c <= 1 or not np.isin(arr, (0, c)).all():
            return None
    estimate = 1 - 1 / c
    for digits in range(1, 10):       # the p the user wrote: the shortest that reproduces c
        p = round(estimate, digits)
        if 0 < p < 1 and as_type(1 / (1 - p)) == as_type(c):
            return p
    return estimate


def mark_stochastic(graph, training):
    """Record dropout's ``p`` on its nodes; refuse other random scales in training."""
    for k, node in enumerate(graph.nodes):
        if node.op != "ScaleShift":
            continue
        scale, shift = node.attrs.get("scale"), node.attrs.get("shift")
        p = _dropout_p(scale, node.attrs.get("factor")) \
            if shift is None and isinstance(scale, cuda.array_types()) else None
        if p is not None:
            node.attrs["_dropout"] = {"p": p, "shape": tuple(scale.shape)}
        elif training and isinstance(scale, cuda.array_types()) and scale.size > 1:
            raise TraceError(f"jit.trace: node {k} (ScaleShift) multiplies by a random "
                             "array drawn in training mode (rrelu or alpha_dropout) that a "
                             "static graph would freeze; trace in eval mode (model.eval() "
                             "or lz.test_mode())")


def check_random(graph, rng_before, fn_name):
    """Refuse a trace that drew random numbers outside dropout: they would be frozen."""
    if get_rng_state() == rng_before:
        return
    if any("_dropout" in n.attrs for n in graph.nodes):
        return
    raise TraceError(f"jit.trace: {fn_name} drew random numbers from LeZero's generator "
                     "(gumbel_softmax, rrelu, a noise sample ...) outside dropout; a static "
                     "graph would replay the same draw on every call. Trace in eval mode "
                     "or keep the random part outside the traced function")


def buffer_snapshot(fn):
    """Copies of a Module's buffers (empty for a plain function)."""
    if not is_module(fn):
        return {}
    return {name: b.copy() for name, b in fn.named_buffers() if b is not None}


def check_buffers(fn, before, fn_name):
    """Raise when the traced run changed a buffer in place."""
    if not before:
        return
    changed = [name for name, b in fn.named_buffers()
               if name in before and b is not None and not A.attrs_equal(before[name], b)]
    if changed:
        restore_buffers(fn, before)
        raise TraceError(
            f"jit.trace: running {fn_name} updated buffers in place ({', '.join(changed[:4])}"
            f"{' ...' if len(changed) > 4 else ''}), as batch norm does in training mode; a "
            "static graph would not update them. Trace in eval mode (model.eval()) for "
            "inference; train with the eager model")


def restore_buffers(fn, saved):
    for name, b in fn.named_buffers():
        if name in saved and b is not None:
            b[...] = saved[name]
