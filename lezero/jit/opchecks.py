"""Per-operator checks of a loaded graph: attributes that drive kernels must agree with
the shapes the graph records.

A replay calls each Function's ``forward`` directly, without the argument checks of
the ``lezero.functions`` wrapper that built it, and several forwards hand their
attributes to Numba kernels that read without bounds checks (a convolution's geometry,
a normalization's parameter shape, a recurrent layer's time steps).  For a graph read
from a file, ``check_node`` therefore re-derives what the wrapper guaranteed from the
recorded shapes, and the executor checks at run time that every node produces the
shape and dtype the file records (``executor.Program(checked=True)``), so these
recorded shapes are the real ones.  A mismatch is a ``GraphFormatError``.
"""
import math

from lezero import cuda
from lezero.jit.errors import GraphFormatError
from lezero.jit.ir import ValueRef

__all__ = ["check_node", "check_fused", "check_runtime_attrs", "broadcasts"]


def _bad(node, text):
    raise GraphFormatError(f"node ({node.op}) {text}")


def broadcasts(shape, out):
    """True when an array of ``shape`` broadcasts to ``out`` (without growing it)."""
    return len(shape) <= len(out) and all(
        s in (1, o) for s, o in zip(shape[::-1], out[::-1]))


def _shapes(node, values):
    return ([values[n].shape for n in node.inputs], [values[n].shape for n in node.outputs])


def _expect(node, what, got, want):
    if tuple(got) != tuple(want):
        _bad(node, f"has {what} of shape {tuple(got)}, expected {tuple(want)} from its "
                   "other inputs and attributes")


def check_runtime_attrs(node, values):
    """The replay's own attributes: ``_dropout`` (a mask of the output's shape drawn per
    call), ``_nograd`` and ``_detach`` (input positions)."""
    drop = node.attrs.get("_dropout")
    if drop is not None:
        out = values[node.outputs[0]].shape
        if node.op != "ScaleShift" or not isinstance(drop, dict) or set(drop) != {"p", "shape"} \
                or type(drop["p"]) is not float or not 0 < drop["p"] < 1 \
                or not isinstance(drop["shape"], tuple) or not broadcasts(drop["shape"], out) \
                or not all(type(d) is int and d >= 0 for d in drop["shape"]):
            _bad(node, f"has a malformed dropout description {str(drop)[:80]}")
    if not isinstance(node.attrs.get("_nograd", False), bool):
        _bad(node, "has a _nograd flag that is not a boolean")
    detach = node.attrs.get("_detach", [])
    if not isinstance(detach, (list, tuple)) or not all(
            type(k) is int and 0 <= k < len(node.inputs) for k in detach):
        _bad(node, f"detaches inputs {str(detach)[:40]} it does not have")


def check_fused(node, parts, values):
    """A fused kernel loops over its float output; every input and part broadcasts to it."""
    out = values[node.outputs[0]]
    if out.dtype.kind != "f":
        _bad(node, f"fuses into a {out.dtype.name} output (fused kernels are floating point)")
    for name in node.inputs + [p.outputs[0] for p in parts]:
        if not broadcasts(values[name].shape, out.shape):
            _bad(node, f"has %{name} of shape {values[name].shape}, which does not broadcast "
                       f"to its output shape {out.shape}")


def _attr_shape(value, values):
    if isinstance(value, ValueRef):
        return values[value.name].shape if value.name in values else None
    if isinstance(value, cuda.array_types()):
        return tuple(value.shape)
    return None


def _normalize(node, values):
    a = node.attrs
    (x, *params), outs = _shapes(node, values)
    flags = [a.get(k) for k in ("has_weight", "has_bias", "center", "trailing")]
    pshape = a.get("param_shape")
    if not all(isinstance(f, bool) for f in flags) or not isinstance(a.get("axes"), tuple) \
            or not all(type(k) is int and 0 <= k < len(a.get("view") or x) for k in a["axes"]):
        _bad(node, "has malformed flags or axes")
    if len(params) != flags[0] + flags[1]:
        _bad(node, f"has {len(params)} parameter inputs, but its flags say "
                   f"{flags[0] + flags[1]}")
    if not (pshape is None or isinstance(pshape, tuple) and all(type(d) is int for d in pshape)):
        _bad(node, f"has a malformed param_shape {str(pshape)[:40]}")
    if params or flags[3]:
        if pshape is None:
            _bad(node, "has parameters but no param_shape")
        for p in params:
            if math.prod(p) != math.prod(pshape):
                _bad(node, f"has a parameter of shape {p} for param_shape {pshape}")
    if flags[3] and (len(pshape) > len(x) or tuple(x[len(x) - len(pshape):]) != pshape
                     or a["axes"] != tuple(range(len(x) - len(pshape), len(x)))):
        _bad(node, f"normalizes the trailing {pshape} of an input of shape {x}")
    view = a.get("view")
    if view is not None and (not isinstance(view, tuple) or math.prod(view) != math.prod(x)):
        _bad(node, f"views an input of shape {x} as {str(view)[:40]}")
    _expect(node, "output", outs[0], x)


def _geom(node):
    from lezero.jit.allow import helper_key
    geom = node.attrs.get("geom")
    if geom is None or helper_key(geom) is None:
        _bad(node, "has no geometry")
    return geom


def _conv(node, values):
    g = _geom(node)
    ins, outs = _shapes(node, values)
    nd = len(g.kernel)
    if not hasattr(g, "groups") or len(ins) not in (2, 3) or any(
            len(s) != 2 + nd for s in ins[:2] + outs[:1]):
        _bad(node, f"has inputs {ins} that do not match a {nd}-D convolution geometry")
    if node.op == "Conv":
        x, w, y = ins[0], ins[1], outs[0]
    elif node.op == "ConvGradInput":
        y, w, x = ins[0], ins[1], outs[0]
    else:
        x, y, w = ins[0], ins[1], outs[0]
    cin, cout = x[1], w[0]
    if cin % g.groups or cout % g.groups:
        _bad(node, f"has {cin} input and {cout} output channels for {g.groups} groups")
    _expect(node, "input", x[2:], g.in_size)
    _expect(node, "weight", w, (cout, cin // g.groups) + g.kernel)
    _expect(node, "output", y, (x[0], cout) + g.out_size)
    if len(ins) == 3:
        _expect(node, "bias", ins[2], (outs[0][1],))


def _pool(node, values):
    g = _geom(node)
    (x, *_), outs = _shapes(node, values)
    if not hasattr(g, "padding") or len(x) != 2 + len(g.kernel):
        _bad(node, f"pools an input of shape {x} with a {len(g.kernel)}-D geometry")
    _expect(node, "input", x[2:], g.in_size)
    _expect(node, "output", outs[0], x[:2] + g.out_size)


def _recurrent(node, values):
    """A fused RNN/LSTM/GRU layer: time steps tile the packed rows, batch sizes never
    grow, and the weights fit the input and the state."""
    ins, _ = _shapes(node, values)
    steps = node.attrs.get("steps")
    n_state = 2 if getattr(node.fn_class, "has_cell", False) else 1
    if len(ins) not in (n_state + 3, n_state + 5) or not isinstance(steps, list) or not all(
            isinstance(s, tuple) and len(s) == 2 and all(type(v) is int for v in s)
            for s in steps):
        _bad(node, "has malformed inputs or time steps")
    x, h0, (w_ih, w_hh) = ins[0], ins[1], ins[1 + n_state:3 + n_state]
    order = sorted(steps)
    offset, last = 0, None
    for off, bs in order:
        if off != offset or bs < 1 or (last is not None and bs > last):
            _bad(node, f"has time steps {str(steps)[:60]} that do not tile its input rows")
        offset, last = off + bs, bs
    widest = order[0][1] if order else 0
    if steps not in (order, order[::-1]) or len(x) != 2 or len(h0) != 2 \
            or offset != x[0] or widest > h0[0] or not order:
        _bad(node, f"has time steps {str(steps)[:60]} that do not fit input {x} and state "
                   f"{h0}")
    hidden = h0[1]
    if len(w_ih) != 2 or len(w_hh) != 2 or w_ih[1] != x[1] or w_hh[1] != hidden \
            or w_ih[0] != w_hh[0] or any(s != h0 for s in ins[2:1 + n_state]) \
            or any(b != (w_ih[0],) for b in ins[3 + n_state:]):
        _bad(node, f"has weights {w_ih}, {w_hh} that do not fit input {x} and state {h0}")


def _masked_softmax(node, values):
    keep = _attr_shape(node.attrs.get("keep"), values)
    s = values[node.inputs[0]].shape if node.inputs else ()
    if keep is not None and not broadcasts(keep, s):
        _bad(node, f"has a mask of shape {keep} for scores of shape {s}")


def _linear(node, values):
    ins, outs = _shapes(node, values)
    if len(ins) not in (2, 3) or len(ins[1]) != 2 or not ins[0]:
        _bad(node, f"has inputs {ins} (expected x, a 2-D weight and a bias)")
    x, w = ins[0], ins[1]
    _expect(node, "weight", w, (w[0], x[-1]))
    if len(ins) == 3:
        _expect(node, "bias", ins[2], (w[0],))
    _expect(node, "output", outs[0], x[:-1] + (w[0],))


def _reduce(node, values):
    if node.attrs.get("name") not in ("argmax", "argmin", "all", "any"):
        _bad(node, f"names reduction {str(node.attrs.get('name'))[:40]!r}, not one of "
                   "argmax, argmin, all, any")


_CHECKS = {"Normalize": _normalize, "Conv": _conv, "ConvGradInput": _conv,
           "ConvGradWeight": _conv, "MaxPoolNd": _pool, "AvgPoolNd": _pool,
           "MaskedSoftmax": _masked_softmax, "Linear": _linear, "Reduce": _reduce}


def check_node(node, values):
    """Run the checks that apply to ``node`` (by operator, or by base class for the
    recurrent layers)."""
    check = _CHECKS.get(node.op)
    if check is None and any(c.__name__ == "_Recurrence"
                             for c in getattr(node.fn_class, "__mro__", ())):
        check = _recurrent
    if check is not None:
        check(node, values)
