"""Buffer reuse: a memory plan computed from the values' lifetimes.

For every node the plan lists the values whose last reader it is, so the executor drops
them right after it (an eager run keeps every intermediate that a Variable still holds;
a replay keeps only what is live).  Values whose lifetimes do not overlap share a
*slot* (register allocation by linear scan), so the executor's value table is as small
as the widest point of the graph.  A fused elementwise node may write its result into
the buffer of an input that dies there (same shape and dtype, not an input, parameter or
constant of the graph): the ``inplace`` table; the executor still checks at run time
that the buffer is a contiguous array of its own that no live value shares.

``str(plan)`` prints the lifetimes, slots and the peak of live intermediate bytes with
and without the plan.
"""
__all__ = ["MemoryPlan", "plan_memory", "memory_pass"]


class MemoryPlan:
    """Lifetimes (``last_use``), per-node frees, slots, in-place outputs, byte counts."""

    def __init__(self):
        self.last_use, self.free_after, self.slots = {}, [], {}
        self.inplace, self.live_at = {}, []
        self.n_slots = self.peak_bytes = self.naive_bytes = 0

    def __str__(self):
        lines = [f"memory plan: {len(self.slots)} values in {self.n_slots} slots; peak live "
                 f"intermediates {self.peak_bytes / 1024:.1f} KiB (keeping every value: "
                 f"{self.naive_bytes / 1024:.1f} KiB); {len(self.inplace)} in-place outputs"]
        for k, names in enumerate(self.free_after):
            extra = f"  in-place over %{self.inplace[k]}" if k in self.inplace else ""
            if names or extra:
                lines.append(f"  after node {k}: free {', '.join('%' + n for n in names)}"
                             f"{extra}")
        return "\n".join(lines)


def _lifetimes(graph):
    last = {}
    for k, node in enumerate(graph.nodes):
        for name in node.deps():
            last[name] = k
    end = len(graph.nodes)
    for name in graph.outputs:
        last[name] = end                  # outputs live to the end
    return last


def _inplace_candidate(graph, k, node, last):
    if node.sub is None or len(node.outputs) != 1:
        return None
    out = graph.values[node.outputs[0]]
    for name in node.inputs:
        v = graph.values[name]
        if (v.kind == "node" and last.get(name) == k and v.shape == out.shape
                and v.dtype == out.dtype and name not in graph.outputs):
            return name
    return None


def plan_memory(graph):
    """Compute the memory plan of ``graph`` (returns a ``MemoryPlan``)."""
    plan = MemoryPlan()
    last = _lifetimes(graph)
    plan.last_use = last
    values = graph.values
    free_slots, n_slots, live, live_bytes = [], 0, set(), 0
    naive = 0
    for k, node in enumerate(graph.nodes):
        plan.live_at.append(sorted(live))
        target = _inplace_candidate(graph, k, node, last)
        if target is not None:
            plan.inplace[k] = target
        for name in node.outputs:
            size = values[name].nbytes
            naive += size
            if name in last or name in graph.outputs:
                if target is not None:
                    plan.slots[name] = plan.slots[target]
                elif free_slots:
                    plan.slots[name] = free_slots.pop()
                else:
                    plan.slots[name] = n_slots
                    n_slots += 1
                live.add(name)
                live_bytes += 0 if target is not None else size
        plan.peak_bytes = max(plan.peak_bytes, live_bytes)
        dying = sorted({n for n in node.deps() + node.outputs
                        if last.get(n, k) == k and values[n].kind == "node"
                        and n not in graph.outputs})
        plan.free_after.append(dying)
        for name in dying:
            if name not in live:
                continue
            live.discard(name)
            if name == target:        # its buffer and slot now belong to the output
                continue
            live_bytes -= values[name].nbytes
            free_slots.append(plan.slots[name])
    plan.n_slots, plan.naive_bytes = n_slots, naive
    return plan


def memory_pass(graph):
    """The buffer-reuse pass: attach a memory plan to a copy of ``graph``."""
    g = graph.copy()
    g.meta["memory"] = plan_memory(g)
    return g
