"""Elementwise fusion's code generator: a chain of elementwise nodes -> one Numba kernel.

``ELEMENTWISE`` maps a Function class name to the scalar expression it computes (a
function of the argument expressions and the node's attributes).  A fused group becomes
straight-line scalar code inside one loop nest over the output::

    def fused(out, a0, a1):
        for i0 in range(out.shape[0]):
            for i1 in range(out.shape[1]):
                x0 = a0[i0, i1]
                x1 = a1[i0, i1]
                t0 = (x0 * x1)
                t1 = max(t0, 0.0)
                out[i0, i1] = t1

Inputs are passed as broadcast views of the output's (collapsed) shape, so one kernel
serves bias-like operands too; adjacent axes that every input treats alike are merged
first (a contiguous tensor is one flat loop).  One pass over memory replaces one pass
per operator, and no intermediate array is allocated.

``FusedKernel`` runs the generated kernel on NumPy arrays when Numba is enabled, and
otherwise the original nodes one after another on arrays: that NumPy path is the
reference the tests compare the kernel with.  Generated sources are written to a cache
folder (``$LEZERO_JIT_CACHE``, default ``~/.cache/lezero/jit``) and compiled with Numba's
on-disk cache, so a kernel compiles once per machine.
"""
import hashlib
import importlib.util
import math
import os
import sys

import numpy as np

from lezero import kernels

__all__ = ["ELEMENTWISE", "is_elementwise", "FusedKernel", "kernel_source", "check_attrs"]


def _f(x):
    """A float attribute as a source literal: only digits, a sign, a point and an
    exponent, or ``math.inf`` / ``math.nan`` (nothing else reaches generated source)."""
    x = float(x)
    if math.isnan(x):
        return "math.nan"
    if math.isinf(x):
        return "math.inf" if x > 0 else "(-math.inf)"
    return repr(x)


def _gelu(a, attrs):
    x = a[0]
    if attrs.get("approximate") == "tanh":
        return (f"(0.5 * {x} * (1.0 + math.tanh(0.7978845608028654 * ({x} + 0.044715 * "
                f"{x} * {x} * {x}))))")
    return f"(0.5 * {x} * (1.0 + math.erf({x} * 0.7071067811865476)))"


def _sigmoid(x):
    return f"(1.0 / (1.0 + math.exp(-{x})) if {x} >= 0 else math.exp({x}) / (1.0 + math.exp({x})))"


def _elu(a, attrs):
    x = a[0]
    return (f"({_f(attrs['scale'])} * ({x} if {x} > 0 else {_f(attrs['alpha'])} * "
            f"math.expm1({x})))")


def _softplus(a, attrs):
    x, beta, thr = a[0], _f(attrs["beta"]), _f(attrs["threshold"])
    return (f"({x} if {beta} * {x} > {thr} else (max({beta} * {x}, 0.0) + "
            f"math.log1p(math.exp(-abs({beta} * {x})))) / {beta})")


# name -> (number of array inputs, expression builder(args, attrs))
ELEMENTWISE = {
    "Add": (2, lambda a, _: f"({a[0]} + {a[1]})"),
    "Sub": (2, lambda a, _: f"({a[0]} - {a[1]})"),
    "Mul": (2, lambda a, _: f"({a[0]} * {a[1]})"),
    "Div": (2, lambda a, _: f"({a[0]} / {a[1]})"),
    "Pow": (2, lambda a, _: f"({a[0]} ** {a[1]})"),
    "Neg": (1, lambda a, _: f"(-{a[0]})"),
    "Square": (1, lambda a, _: f"({a[0]} * {a[0]})"),
    "Sqrt": (1, lambda a, _: f"math.sqrt({a[0]})"),
    "Rsqrt": (1, lambda a, _: f"(1.0 / math.sqrt({a[0]}))"),
    "Reciprocal": (1, lambda a, _: f"(1.0 / {a[0]})"),
    "Exp": (1, lambda a, _: f"math.exp({a[0]})"),
    "Expm1": (1, lambda a, _: f"math.expm1({a[0]})"),
    "Log": (1, lambda a, _: f"math.log({a[0]})"),
    "Log1p": (1, lambda a, _: f"math.log1p({a[0]})"),
    "Abs": (1, lambda a, _: f"abs({a[0]})"),
    "Sin": (1, lambda a, _: f"math.sin({a[0]})"),
    "Cos": (1, lambda a, _: f"math.cos({a[0]})"),
    "Tanh": (1, lambda a, _: f"math.tanh({a[0]})"),
    "Erf": (1, lambda a, _: f"math.erf({a[0]})"),
    "ReLU": (1, lambda a, _: f"max({a[0]}, 0.0)"),
    "LeakyReLU": (1, lambda a, at: f"({a[0]} if {a[0]} > 0 else {a[0]} * {_f(at['slope'])})"),
    "HardTanh": (1, lambda a, at: f"min(max({a[0]}, {_f(at['lo'])}), {_f(at['hi'])})"),
    "HardSigmoid": (1, lambda a, _: f"min(max({a[0]} / 6.0 + 0.5, 0.0), 1.0)"),
    "HardSwish": (1, lambda a, _: f"({a[0]} * min(max({a[0]} + 3.0, 0.0), 6.0) / 6.0)"),
    "Sigmoid": (1, lambda a, _: _sigmoid(a[0])),
    "SiLU": (1, lambda a, _: f"({a[0]} * {_sigmoid(a[0])})"),
    "Softsign": (1, lambda a, _: f"({a[0]} / (1.0 + abs({a[0]})))"),
    "TanhShrink": (1, lambda a, _: f"({a[0]} - math.tanh({a[0]}))"),
    "GELU": (1, _gelu),
    "ELU": (1, _elu),
    "Softplus": (1, _softplus),
}


# the numeric attributes each operator's expression embeds (via ``_f``)
NUMERIC_ATTRS = {"LeakyReLU": ("slope",), "HardTanh": ("lo", "hi"), "ELU": ("scale", "alpha"),
                 "Softplus": ("beta", "threshold")}


def check_attrs(op, attrs):
    """What is wrong with a loaded node's attributes for code generation (None if
    nothing): every embedded attribute must be a real number, ``approximate`` a string."""
    for key in NUMERIC_ATTRS.get(op, ()):
        value = attrs.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float, np.floating,
                                                             np.integer)):
            return f"attribute {key!r} must be a number, got {type(value).__name__}"
    if op == "GELU" and not isinstance(attrs.get("approximate", "none"), str):
        return "attribute 'approximate' must be a string"
    return None


def is_elementwise(node):
    """A node the fusion pass may put into a kernel."""
    entry = ELEMENTWISE.get(node.op)
    return (entry is not None and node.sub is None and len(node.outputs) == 1
            and len(node.inputs) == entry[0] and not node.refs()
            and "_dropout" not in node.attrs)


def _collapse(out_shape, in_shapes):
    """Merge adjacent output axes that every input treats alike (all full or all
    broadcast); drop axes of size one.  Returns (out shape, per-input shapes)."""
    n = len(out_shape)
    padded = [(1,) * (n - len(s)) + tuple(s) for s in in_shapes]
    axes = [d for d in range(n) if out_shape[d] != 1]
    groups = []
    for d in axes:
        status = tuple(p[d] == out_shape[d] for p in padded)
        if groups and groups[-1][0] == status:
            groups[-1][1].append(d)
        else:
            groups.append((status, [d]))
    out = tuple(math.prod(out_shape[d] for d in dims) for _, dims in groups) or (1,)
    ins = []
    for k in range(len(in_shapes)):
        ins.append(tuple(size if status[k] else 1
                         for size, (status, _) in zip(out, groups)) or (1,))
    return out, ins


def kernel_source(sub_nodes, ext_inputs, out_name, ndim, in_shapes=None):
    """The Python source of the fused kernel (function ``fused``).  An input whose
    (collapsed) shape has 1 on an axis is indexed with 0 there: broadcasting in the
    index, so no broadcast view has to be built per call."""
    idx = ", ".join(f"i{d}" for d in range(ndim))
    in_shapes = in_shapes or [None] * len(ext_inputs)
    args = ", ".join(f"a{k}" for k in range(len(ext_inputs)))
    lines = ["import math", "", "", f"def fused(out, {args}):"]
    indent = "    "
    for d in range(ndim):
        lines.append(f"{indent}for i{d} in range(out.shape[{d}]):")
        indent += "    "
    names = {}
    for k, name in enumerate(ext_inputs):
        shape = in_shapes[k]
        at = idx if shape is None else ", ".join(
            f"i{d}" if shape[d] != 1 else "0" for d in range(ndim))
        lines.append(f"{indent}x{k} = a{k}[{at}]")
        names[name] = f"x{k}"
    for k, node in enumerate(sub_nodes):
        expr = ELEMENTWISE[node.op][1]([names[n] for n in node.inputs], node.attrs)
        lines.append(f"{indent}t{k} = {expr}")
        names[node.outputs[0]] = f"t{k}"
    lines.append(f"{indent}out[{idx}] = {names[out_name]}")
    return "\n".join(lines) + "\n"


_COMPILED = {}


def _cache_dir():
    path = os.environ.get("LEZERO_JIT_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "lezero", "jit")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError:
        return None
    return path if os.access(path, os.W_OK) else None


def _cached_text(path):
    """The text of a cached kernel module (None when it cannot be read)."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read(1 << 20)
    except (OSError, UnicodeDecodeError):
        return None


def _compile(source):
    """The Numba dispatcher of ``source``'s ``fused`` (from a cached module file when the
    cache folder is writable, so Numba can keep the machine code on disk)."""
    fn = _COMPILED.get(source)
    if fn is not None:
        return fn
    import numba
    digest = hashlib.sha1(source.encode()).hexdigest()[:16]
    folder = _cache_dir()
    namespace = None
    if folder is not None:
        from lezero.utils.files import atomic_write
        path = os.path.join(folder, f"lzfused_{digest}.py")
        if _cached_text(path) != source:    # absent, or not what this source would write
            atomic_write(path, source, where="jit fusion")
        name = f"lzfused_{digest}"
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module      # Numba's on-disk cache finds the module by name
        spec.loader.exec_module(module)
        fn = numba.njit(cache=True)(module.fused)
    else:
        namespace = {}
        exec(compile(source, f"<lzfused_{digest}>", "exec"), namespace)
        fn = numba.njit(namespace["fused"])
    _COMPILED[source] = fn
    return fn


class FusedKernel:
    """Runs a fused group: the generated Numba kernel, or the nodes one by one."""

    def __init__(self, sub_nodes, ext_inputs, out_value, in_values):
        self.sub, self.ext = sub_nodes, list(ext_inputs)
        self.out_shape, self.dtype = out_value.shape, out_value.dtype
        self.out_name = out_value.name
        self.shape, self.in_shapes = _collapse(out_value.shape,
                                               [v.shape for v in in_values])
        # the collapsed shape marks broadcast axes with 1 (an output axis of size 1 too)
        patterns = [tuple(1 if (n == 1 and o != 1) else o for n, o in zip(s, self.shape))
                    for s in self.in_shapes]
        self.source = kernel_source(sub_nodes, ext_inputs, out_value.name, len(self.shape),
                                    patterns)
        self._fn = None

    def numpy_path(self, xs):
        """The reference: every node's own forward, in order."""
        from lezero.jit.executor import evaluate
        env = dict(zip(self.ext, xs))
        for node in self.sub:
            env[node.outputs[0]] = evaluate(node, [env[n] for n in node.inputs], env.get)[0]
        return env[self.out_name]

    def numba_path(self, xs, out=None):
        if self._fn is None:
            self._fn = _compile(self.source)
        views = [(x if x.dtype == self.dtype else x.astype(self.dtype)).reshape(s)
                 for x, s in zip(xs, self.in_shapes)]
        if out is None or out.shape != self.out_shape or out.dtype != self.dtype:
            out = np.empty(self.out_shape, self.dtype)
        self._fn(out.reshape(self.shape), *views)
        return out

    def __call__(self, xs, out=None):
        if kernels.enabled(*xs):
            return self.numba_path(xs, out)
        return self.numpy_path(xs)
