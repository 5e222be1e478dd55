"""Fusion: groups of elementwise nodes become one ``Fused`` node with a generated kernel.

A node joins the group of an elementwise producer when it is that producer's only
reader (so the intermediate value is never needed outside the group) and every value
involved has the group's floating dtype.  Groups grow along chains and trees (``relu(x *
s + b)`` is one group of three).  Each group of two or more nodes is replaced, at the
position of its last node, by a node ``Fused`` whose ``sub`` lists the originals (kept
for printing, saving, the NumPy reference path and autograd replay) and whose
``_kernel`` is a ``codegen.FusedKernel``.
"""
from lezero.jit.ir import Node
from lezero.jit.passes.codegen import FusedKernel, is_elementwise

__all__ = ["fuse", "attach_kernel"]


def _float_dtype(g, node):
    out = g.values[node.outputs[0]].dtype
    if out.kind != "f":
        return None
    if any(g.values[n].dtype != out for n in node.inputs):
        return None
    return out


def _groups(g):
    """{id(last node): [member nodes in order]} for fusable groups of two or more."""
    producers = g.producers()
    users = g.users()
    outputs = set(g.outputs)
    group_of = {}                       # id(node) -> list shared by the group's members
    position = {id(n): k for k, n in enumerate(g.nodes)}
    for node in g.nodes:
        if not is_elementwise(node) or _float_dtype(g, node) is None:
            continue
        members = [node]
        for name in node.inputs:
            src = producers.get(name)
            if (src is not None and id(src) in group_of and name not in outputs
                    and len(users.get(name, ())) == 1
                    and g.values[name].dtype == g.values[node.outputs[0]].dtype):
                for m in group_of[id(src)]:
                    if m not in members:
                        members.append(m)
        members.sort(key=lambda m: position[id(m)])
        for m in members:
            group_of[id(m)] = members
    result = {}
    for members in {id(m): m for m in group_of.values()}.values():
        if len(members) > 1:
            result[id(members[-1])] = members
    return result


def attach_kernel(g, node):
    """Give a ``Fused`` node its kernel (also used when a saved graph is loaded)."""
    out = g.values[node.outputs[0]]
    node.attrs["_kernel"] = FusedKernel(node.sub, node.inputs, out,
                                        [g.values[n] for n in node.inputs])
    return node


def fuse(graph):
    """A copy of ``graph`` with elementwise groups fused into generated kernels."""
    g = graph.copy()
    groups = _groups(g)
    new_nodes, count = [], 0
    member_ids = {id(m) for ms in groups.values() for m in ms}
    for node in g.nodes:
        members = groups.get(id(node))
        if members is None:
            if id(node) not in member_ids:
                new_nodes.append(node)
            continue
        inside = {o for m in members for o in m.outputs}
        ext = []
        for m in members:
            for name in m.inputs:
                if name not in inside and name not in ext:
                    ext.append(name)
        fused = Node("Fused", ext, list(node.outputs), {}, None, sub=members)
        new_nodes.append(attach_kernel(g, fused))
        count += 1
    g.nodes = new_nodes
    g.meta["fused_groups"] = count
    g.meta.pop("memory", None)
    return g
