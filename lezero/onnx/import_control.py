"""ONNX control flow run with LeZero: If, Loop and Scan (registered into
``import_ops.IMPORT_OPS``).

Their bodies are subgraphs, run by the importer (``module.run_subgraph``) with the
values of the enclosing graph visible.  The iterations are unrolled as they run, so a
loss computed from a Loop's or Scan's outputs back-propagates through every step into
the Parameters the bodies read.  Sequence and optional values are not tensors LeZero
runs: a body that makes one fails inside it, naming that node.  A Loop stops after
``MAX_ITERATIONS`` steps with an error (a hostile file could otherwise loop forever).
"""
import numpy as np

import lezero.functions as F
from lezero import cuda
from lezero.onnx.import_ops import arr, is_var, op, scalar

__all__ = ["MAX_ITERATIONS"]

MAX_ITERATIONS = 1_000_000


def _flag(x):
    return bool(scalar(x))


def _take(x, k, axis):
    """Element ``k`` of ``x`` along ``axis`` (that axis removed)."""
    index = (slice(None),) * axis + (k,)
    return F.get_item(x, index) if is_var(x) else arr(x)[index]


def _stack(values, axis, where):
    """``values`` (one per iteration) stacked along a new ``axis``."""
    if any(is_var(v) for v in values):
        return F.stack(values, axis=axis)
    xp = cuda.get_array_module(*[arr(v) for v in values])
    try:
        return xp.stack([arr(v) for v in values], axis=axis)
    except ValueError as e:
        raise ValueError(f"{where}: the body's outputs change shape between iterations "
                         f"({e})") from None


def _empty_scan(graph, k, op_name):
    """A scan output of a loop that ran no iteration: (0, *declared shape)."""
    elem_type, dims = graph.output_info[k]
    if dims is None or None in dims or not elem_type:
        raise ValueError(f"{op_name} ran no iteration and the body does not declare the "
                         f"static shape and type of scan output {k}")
    from lezero.onnx._deps import onnx
    dtype = onnx().helper.tensor_dtype_to_np_dtype(elem_type)
    return np.zeros([0] + list(dims), dtype=dtype)


@op("If")
def _if(node, args, module):
    """The outputs of ``then_branch`` when the condition holds, else of ``else_branch``."""
    branch = node.attrs["then_branch" if _flag(args[0]) else "else_branch"]
    outs = module.run_subgraph(branch, [])
    if len(outs) != len(node.outputs):
        raise ValueError(f"If: the branch gives {len(outs)} outputs, the node names "
                         f"{len(node.outputs)}")
    return outs


def _loop_limits(args):
    """(trip count or None, first condition) of a Loop's optional inputs M and cond."""
    trips = int(scalar(args[0])) if len(args) > 0 and args[0] is not None else None
    go = _flag(args[1]) if len(args) > 1 and args[1] is not None else True
    return trips, go


@op("Loop")
def _loop(node, args, module):
    """Run ``body`` while the trip count lasts and its condition holds; the final
    loop-carried values, then each scan output stacked over the iterations (axis 0)."""
    body = node.attrs["body"]
    trips, go = _loop_limits(args)
    carried = list(args[2:])
    n_scan = len(body.output_names) - 1 - len(carried)
    if len(body.input_names) != 2 + len(carried) or n_scan < 0:
        raise ValueError(f"Loop: the body takes {len(body.input_names)} inputs and gives "
                         f"{len(body.output_names)} outputs for {len(carried)} loop-carried "
                         "values (it must take 2 + N and give 1 + N + K)")
    scans, i = [[] for _ in range(n_scan)], 0
    while go and (trips is None or i < trips):
        if i >= MAX_ITERATIONS:
            raise ValueError(f"Loop: more than {MAX_ITERATIONS} iterations")
        outs = module.run_subgraph(body, [np.asarray(i, np.int64), np.asarray(go)]
                                   + carried)
        go = _flag(outs[0])
        carried = outs[1:1 + len(carried)]
        for k, value in enumerate(outs[1 + len(carried):]):
            scans[k].append(value)
        i += 1
    stacked = [_stack(s, 0, "Loop") if s else _empty_scan(body, 1 + len(carried) + k, "Loop")
               for k, s in enumerate(scans)]
    return carried + stacked


def _axes(node, name, count, ranks):
    """Attribute ``name`` (one axis per tensor, default 0), negative axes resolved."""
    axes = list(node.attrs.get(name, [0] * count))
    if len(axes) != count:
        raise ValueError(f"Scan: attribute {name} has {len(axes)} entries for {count} "
                         "tensors")
    for k, (a, rank) in enumerate(zip(axes, ranks)):
        if not -rank <= a < rank:
            raise ValueError(f"Scan: {name}[{k}] = {a} is outside a rank-{rank} tensor")
    return [a % rank for a, rank in zip(axes, ranks)]


def _scan_steps(node, body, states, inputs, module):
    """Run a Scan (opset 9+) over ``inputs``; (final states, scan outputs)."""
    m = len(inputs)
    in_axes = _axes(node, "scan_input_axes", m, [arr(x).ndim for x in inputs])
    in_dirs = node.attrs.get("scan_input_directions", [0] * m)
    lengths = {arr(x).shape[a] for x, a in zip(inputs, in_axes)}
    if len(lengths) != 1:
        raise ValueError(f"Scan: the scan inputs have different lengths {sorted(lengths)}")
    steps = lengths.pop()
    n_out = len(body.output_names) - len(states)
    if len(body.input_names) != len(states) + m or n_out < 0:
        raise ValueError(f"Scan: the body takes {len(body.input_names)} inputs and gives "
                         f"{len(body.output_names)} outputs for {len(states)} states and "
                         f"{m} scan inputs")
    elements = [[] for _ in range(n_out)]
    for t in range(steps):
        picks = [_take(x, steps - 1 - t if d else t, a)
                 for x, a, d in zip(inputs, in_axes, in_dirs)]
        outs = module.run_subgraph(body, list(states) + picks)
        states = outs[:len(states)]
        for k, value in enumerate(outs[len(states):]):
            elements[k].append(value)
    out_dirs = node.attrs.get("scan_output_directions", [0] * n_out)
    ranks = [arr(e[0]).ndim + 1 if e else 1 for e in elements]
    out_axes = _axes(node, "scan_output_axes", n_out, ranks)
    scans = []
    for k, (e, a, d) in enumerate(zip(elements, out_axes, out_dirs)):
        if not e:
            scans.append(_empty_scan(body, len(states) + k, "Scan"))
            continue
        scans.append(_stack(e[::-1] if d else e, a, "Scan"))
    return list(states), scans


@op("Scan")
def _scan(node, args, module):
    """Opset 9+: states, then ``num_scan_inputs`` tensors sliced along their scan axes;
    opset 8: a leading batch axis on every tensor, each batch entry scanned in turn."""
    m = node.attrs["num_scan_inputs"]
    if module.opset >= 9:
        states, inputs = args[:len(args) - m], args[len(args) - m:]
        states, scans = _scan_steps(node, node.attrs["body"], states, inputs, module)
        return states + scans
    lens, rest = args[0], args[1:]
    states, inputs = rest[:len(rest) - m], rest[len(rest) - m:]
    batch, steps = arr(inputs[0]).shape[:2]
    if lens is not None and (np.asarray(cuda.as_numpy(arr(lens))) != steps).any():
        raise ValueError("Scan (opset 8): sequence_lens shorter than the sequence axis are "
                         "not supported")
    if batch == 0:
        raise ValueError("Scan (opset 8): an empty batch is not supported")
    per_batch = []
    for b in range(batch):
        one = _Opset9(node, m)
        per_batch.append(_scan_steps(one, node.attrs["body"], [_take(s, b, 0) for s in states],
                                     [_take(x, b, 0) for x in inputs], module))
    n_states = len(states)
    columns = [[s[k] for s, _ in per_batch] for k in range(n_states)]
    columns += [[o[k] for _, o in per_batch] for k in range(len(per_batch[0][1]))]
    return [_stack(c, 0, "Scan") for c in columns]


class _Opset9:
    """An opset-8 Scan node seen as opset 9's: ``directions`` become the scan inputs'."""

    def __init__(self, node, m):
        self.attrs = {"scan_input_directions": node.attrs.get("directions", [0] * m)}
