"""Replay a Graph: on raw arrays (inference) or through the autograd engine (training).

``Program`` turns a graph into a list of steps once: the Function class, its static
attributes, the slots of its inputs and outputs (from the memory plan) and the values
to drop after it.  Each call then

* **on arrays** (``run_arrays``): makes a fresh instance of each Function (attributes
  copied, no graph links) and calls ``forward(*arrays)`` directly: no Variable is built,
  no argument checks or module code run.  Fused nodes run their generated kernel;
* **with autograd** (``run_variables``): calls each fresh instance as a Function on
  Variables, so the engine records the replayed graph and ``loss.backward()``
  differentiates it with every operator's own backward: gradients are those of eager
  execution.  Fused nodes are replayed as the nodes they replaced.

Dropout nodes draw a fresh mask from LeZero's generator on every call, with the same
calls dropout makes, so a seeded replay reproduces a seeded eager run.

A graph loaded from a file (``graph.meta["loaded_from"]``) is replayed *checked*: after
each node the executor compares what it produced with the shape and dtype the file
records and raises ``GraphFormatError`` on a difference, so the load-time checks, which
read those records, describe the arrays that really flow (a few tuple comparisons per
node; traced graphs skip them).
"""
import numpy as np

from lezero import cuda
from lezero.core import Variable, as_array
from lezero.random import get_rng
from lezero.jit.attrs import instantiate
from lezero.jit.errors import GraphFormatError
from lezero.jit.ir import resolve_refs, walk_refs
from lezero.jit.passes.memory import plan_memory

__all__ = ["Program"]


class _Step:
    __slots__ = ("node", "cls", "attrs", "containers", "refs", "ins", "outs", "free",
                 "dropout", "kernel", "inplace", "live", "n_in", "cut", "expect")

    def __init__(self, node, slot_of, plan_index, plan):
        self.node, self.cls = node, node.fn_class
        self.refs = [(k, v) for k, v in node.attrs.items()
                     if not k.startswith("_") and any(True for _ in walk_refs(v))]
        ref_keys = {k for k, _ in self.refs}
        self.attrs = {k: v for k, v in node.attrs.items()
                      if not k.startswith("_") and k not in ref_keys}
        self.containers = [k for k, v in self.attrs.items() if type(v) in (dict, list, set)]
        self.ins = [slot_of[n] for n in node.inputs]
        self.outs = [slot_of.get(n) for n in node.outputs]
        self.n_in = len(node.inputs)
        self.dropout = node.attrs.get("_dropout")
        # Inputs eager code passed as constants: replay cuts the gradient there too.
        self.cut = (set(range(self.n_in)) if node.attrs.get("_nograd")
                    else set(node.attrs.get("_detach", ())))
        self.kernel = node.attrs.get("_kernel")
        self.expect = None
        self.free, self.inplace, self.live = [], None, []
        if plan is not None and plan_index is not None:
            target = plan.inplace.get(plan_index)
            self.free = [slot_of[n] for n in plan.free_after[plan_index]
                         if n in slot_of and n != target]
            self.inplace = slot_of[target] if target is not None else None
            self.live = [slot_of[n] for n in plan.live_at[plan_index] if n in slot_of]


def _fresh_mask(p, shape, like):
    """The kept mask ``F.dropout`` would draw (U >= p, from the process generator) and the
    factor 1 / (1 - p) of the kept elements."""
    xp = cuda.get_array_module(like)
    return get_rng(xp).random(shape, dtype="float32") >= p, 1 / (1 - p)


class Program:
    """A graph compiled into steps; see the module docstring."""

    def __init__(self, graph, expand_fused=False):
        self.graph = graph
        plan = None if expand_fused else graph.meta.get("memory") or plan_memory(graph)
        nodes = graph.nodes
        if expand_fused:
            nodes = [s for n in graph.nodes for s in (n.sub if n.sub is not None else [n])]
        slot_of = dict(plan.slots) if plan is not None else {}
        n = plan.n_slots if plan is not None else 0
        for node in nodes:                       # unplanned values get their own slot
            for name in node.outputs:
                if name not in slot_of:
                    slot_of[name], n = n, n + 1
        self.fixed = []
        for name in list(graph.inputs) + list(graph.params) + list(graph.consts):
            if name not in slot_of:
                slot_of[name], n = n, n + 1
                self.fixed.append(name)
        self.n_slots, self.slot_of = n, slot_of
        self.steps = [_Step(node, slot_of, None if expand_fused else k, plan)
                      for k, node in enumerate(nodes)]
        self.source = graph.meta.get("loaded_from")
        if self.source is not None:
            for step in self.steps:
                step.expect = [(graph.values[n].shape, graph.values[n].dtype)
                               for n in step.node.outputs]
        self.in_slots = [slot_of[n] for n in graph.inputs]
        self.param_slots = [(slot_of[n], p) for n, p in graph.params.items()]
        self.const_slots = [(slot_of[n], c) for n, c in graph.consts.items()]
        self.out_slots = [slot_of[n] for n in graph.outputs]
        self.expand_fused = expand_fused

    def _env(self, inputs, wrap):
        env = [None] * self.n_slots
        for slot, x in zip(self.in_slots, inputs):
            env[slot] = x
        for slot, p in self.param_slots:
            env[slot] = p if wrap else p.data
        for slot, c in self.const_slots:
            env[slot] = Variable(c, requires_grad=False) if wrap else c
        return env

    def _function(self, step, env, data_of):
        f = instantiate(step.cls, step.attrs, step.containers)
        for key, value in step.refs:
            f.__dict__[key] = resolve_refs(value, lambda name: data_of(
                env[self.slot_of[name]]))
        if step.dropout is not None:
            like = data_of(env[step.ins[0]])
            f.scale, f.factor = _fresh_mask(step.dropout["p"], step.dropout["shape"], like)
        return f

    def run_arrays(self, inputs):
        """Replay on arrays; returns the output arrays."""
        env = self._env(inputs, wrap=False)
        for step in self.steps:
            xs = [env[i] for i in step.ins]
            if step.kernel is not None:
                ys = (step.kernel(xs, self._buffer(step, env)),)
            else:
                f = self._function(step, env, _identity)
                f.needs_input_grad = (False,) * step.n_in
                ys = f.forward(*xs)
                if not isinstance(ys, tuple):
                    ys = (ys,)
            if step.expect is not None:
                self._check(step, ys)
            for slot, y in zip(step.outs, ys):
                if slot is not None:
                    env[slot] = y if type(y) is np.ndarray else as_array(y)
            for slot in step.free:
                env[slot] = None
        return [env[i] for i in self.out_slots]

    def _check(self, step, ys):
        """A loaded graph's node must produce what its file records."""
        ys = [y if hasattr(y, "shape") else np.asarray(y) for y in ys]
        if len(ys) == len(step.expect) and all(y.shape == shape and y.dtype == dtype
                                               for y, (shape, dtype) in zip(ys, step.expect)):
            return
        got = [f"{y.dtype}{list(y.shape)}" for y in ys]
        want = [f"{dtype}{list(shape)}" for shape, dtype in step.expect]
        raise GraphFormatError(f"jit: graph loaded from {self.source!r}: node {step.node.op} "
                               f"produced {', '.join(got)}, but the file records "
                               f"{', '.join(want)}")

    def _buffer(self, step, env):
        """The dying input buffer a fused kernel may overwrite, when that is safe."""
        if step.inplace is None:
            return None
        buf = env[step.inplace]
        if not (isinstance(buf, np.ndarray) and buf.flags.c_contiguous and buf.flags.owndata
                and buf.flags.writeable):
            return None
        for slot in step.live:
            other = env[slot]
            if slot != step.inplace and isinstance(other, np.ndarray) \
                    and np.may_share_memory(buf, other):
                return None
        return buf

    def run_variables(self, inputs):
        """Replay as Functions on Variables (recorded for backward); returns Variables."""
        env = self._env(inputs, wrap=True)
        for step in self.steps:
            f = self._function(step, env, _data)
            xs = [env[i] for i in step.ins]
            for k in step.cut:
                xs[k] = Variable(_data(xs[k]), requires_grad=False)
            ys = f(*xs)
            if not isinstance(ys, (list, tuple)):
                ys = (ys,)
            if step.expect is not None:
                self._check(step, [_data(y) for y in ys])
            for slot, y in zip(step.outs, ys):
                if slot is not None:
                    env[slot] = y
        return [env[i] for i in self.out_slots]


def _identity(x):
    return x


def _data(x):
    return x.data if isinstance(x, Variable) else x


def evaluate(node, xs, lookup):
    """Run one node's forward on arrays ``xs`` (attribute-bound values from ``lookup``);
    returns a tuple of arrays (used by constant folding and the fused kernels' NumPy
    path)."""
    if node.sub is not None:
        raise ValueError("evaluate: a fused node runs through its kernel")
    attrs = {k: v for k, v in node.attrs.items() if not k.startswith("_")}
    f = instantiate(node.fn_class, attrs, [k for k, v in attrs.items()
                                          if type(v) in (dict, list, set)])
    for key, value in attrs.items():
        if any(True for _ in walk_refs(value)):
            f.__dict__[key] = resolve_refs(value, lookup)
    f.needs_input_grad = (False,) * len(xs)
    ys = f.forward(*xs)
    ys = ys if isinstance(ys, tuple) else (ys,)
    return tuple(y if type(y) is np.ndarray else as_array(y) for y in ys)
