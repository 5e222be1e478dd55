"""ONNX rules for the mixture-of-experts routing Functions
(``lezero.functions.shape.structure``, used by ``lezero.nn.layers.moe``).

``RouteTopK`` becomes TopK on the router probabilities, its indices compared with the
expert ids (a one-hot per slot); ``RouteCapacity`` counts each expert's assignments with
CumSum in priority order and keeps those within ceil(N * num / den), N read from the
tensor's run-time shape (int64 arithmetic, exact), so routing and capacity follow the
input and the batch and sequence sizes in the file.
"""
import numpy as np

from lezero.onnx.registry import onnx_op


@onnx_op("RouteTopK", opset=11, emits=("TopK", "Transpose", "Unsqueeze", "Equal", "Cast"),
         notes="mixture-of-experts routing: one-hot of the top-k experts")
def _route_topk(ctx, node):
    probs = ctx.ins(node)[0]
    num_experts = ctx.shape(node.inputs[0])[-1]
    _, ids = ctx.emit("TopK", [probs, ctx.ints([node.attrs["k"]])], n_out=2, axis=-1,
                      largest=1, sorted=1)                              # (N, k)
    slots = ctx.emit("Unsqueeze", [ctx.emit("Transpose", [ids], perm=[1, 0]),
                                   ctx.ints([2])])                      # (k, N, 1)
    hit = ctx.emit("Equal", [slots, ctx.const(np.arange(num_experts, dtype=np.int64),
                                              "expert_ids")])
    ctx.emit("Cast", [hit], node.outputs, to=ctx.tensor_type(ctx.dtype(node.inputs[0])))


@onnx_op("RouteCapacity", opset=13, emits=("Shape", "Gather", "Mul", "Add", "Div", "Cast",
                                           "Reshape", "CumSum", "Greater", "Not"),
         notes="mixture-of-experts capacity: CumSum in priority order")
def _route_capacity(ctx, node):
    hits = ctx.ins(node)[0]
    dtype = ctx.dtype(node.inputs[0])
    num, den, num_experts = node.attrs["num"], node.attrs["den"], ctx.shape(node.inputs[0])[-1]
    n = ctx.emit("Gather", [ctx.emit("Shape", [hits]), ctx.ints([1])], axis=0)   # [N]
    capacity = ctx.emit("Div", [ctx.emit("Add", [ctx.emit("Mul", [n, ctx.ints([num])]),
                                                 ctx.ints([den - 1])]), ctx.ints([den])])
    capacity = ctx.emit("Cast", [capacity], to=ctx.tensor_type(dtype))
    flat = ctx.emit("Reshape", [hits, ctx.ints([-1, num_experts])])          # (k * N, E)
    count = ctx.emit("CumSum", [flat, ctx.const(np.asarray(0, np.int64))])
    fits = ctx.emit("Cast", [ctx.emit("Not", [ctx.emit("Greater", [count, capacity])])],
                    to=ctx.tensor_type(dtype))
    kept = ctx.emit("Mul", [flat, fits])
    ctx.emit("Reshape", [kept, ctx.emit("Shape", [hits])], node.outputs)
