"""ONNX ``LSTM``, ``GRU`` and ``RNN`` stepped in time with LeZero functions, for what the fused
kernels (PyTorch's gate layout) do not compute: GRU with ``linear_before_reset=0`` (the
ONNX default: the reset gate scales the hidden state *before* its matrix product), LSTM
peepholes (input ``P``), ``clip``, per-sequence lengths, and other gate activations
(Sigmoid, Tanh, Relu; each direction its own).

The equations are ONNX's (gate blocks of ``W``/``R``/``B`` in its order: LSTM ``iofc``,
peepholes ``iof``; GRU ``zrh``).  Steps past a sequence's length keep its state and
output zeros, so ``Y_h`` is the state at its last step, in either direction.
"""
import numpy as np

import lezero.functions as F
from lezero import cuda
from lezero.onnx.import_ops import arr

__all__ = ["needs_steps", "run_steps"]

_ACTIVATIONS = {"sigmoid": F.sigmoid, "tanh": F.tanh, "relu": F.relu}
_DEFAULTS = {"LSTM": ["Sigmoid", "Tanh", "Tanh"], "GRU": ["Sigmoid", "Tanh"], "RNN": ["Tanh"]}
_GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}


def needs_steps(node, args):
    """Whether this LSTM/GRU/RNN node needs the stepped implementation."""
    a, kind = node.attrs, node.op
    if a.get("clip") is not None or a.get("input_forget", 0):
        return True
    acts = {n.lower() for n in a.get("activations", ["tanh"])}
    if "activations" in a and (kind != "RNN" or acts not in ({"tanh"}, {"relu"})):
        return True
    if kind == "GRU" and not a.get("linear_before_reset", 0):
        return True
    if kind == "LSTM" and len(args) > 7 and args[7] is not None:
        return True
    if len(args) > 4 and args[4] is not None:       # a sequence shorter than the input
        steps = arr(args[0]).shape[1 if a.get("layout", 0) else 0]
        return bool((cuda.as_numpy(arr(args[4])) < steps).any())
    return False


def _activations(node, dirs):
    names = node.attrs.get("activations", _DEFAULTS[node.op] * dirs)
    if node.attrs.get("activation_alpha") or node.attrs.get("activation_beta"):
        raise ValueError(f"{node.op} with activation_alpha/beta is not supported")
    unknown = [n for n in names if n.lower() not in _ACTIVATIONS]
    if unknown:
        raise ValueError(f"{node.op} activation {unknown[0]!r} is not supported (Sigmoid, "
                         "Tanh, Relu)")
    fns = [_ACTIVATIONS[n.lower()] for n in names]
    per = len(_DEFAULTS[node.op])
    if len(fns) != per * dirs:
        raise ValueError(f"{node.op} needs {per * dirs} activations, got {len(names)}")
    return [fns[d * per:(d + 1) * per] for d in range(dirs)]


def _blocks(v, count):
    """``v`` (…, count * hidden) split into ``count`` blocks along its last axis."""
    h = v.shape[-1] // count
    return [F.get_item(v, (Ellipsis, slice(k * h, (k + 1) * h))) for k in range(count)]


class _Cell:
    """One direction's weights and the step function of its recurrence."""

    def __init__(self, node, args, d, acts):
        self.kind, self.acts = node.op, acts
        self.clip = node.attrs.get("clip")
        self.lbr = node.attrs.get("linear_before_reset", 0)
        w, r = F.get_item(args[1], d), F.get_item(args[2], d)
        self.r = F.transpose(r)
        gates = _GATES[self.kind]
        if len(args) > 3 and args[3] is not None:
            b = F.get_item(args[3], d)
        else:
            b = cuda.get_array_module(arr(w)).zeros(2 * gates * int(node.attrs["hidden_size"]),
                                                    dtype=arr(w).dtype)
        self.wb, self.rb = _blocks(b, 2)
        self.w = F.transpose(w)
        p = args[7] if self.kind == "LSTM" and len(args) > 7 else None
        self.p = None if p is None else _blocks(F.get_item(p, d), 3)

    def _act(self, k, v):
        if self.clip is not None:
            v = F.clip(v, -self.clip, self.clip)
        return self.acts[k](v)

    def step(self, xw, h, c):
        """(new h, new c) from the input projection ``xw`` of one step."""
        if self.kind == "RNN":
            return self._act(0, xw + F.matmul(h, self.r) + self.rb), None
        if self.kind == "LSTM":
            i, o, f, g = _blocks(xw + F.matmul(h, self.r) + self.rb, 4)
            if self.p is not None:
                i, f = i + self.p[0] * c, f + self.p[2] * c
            c = self._act(0, f) * c + self._act(0, i) * self._act(1, g)
            if self.p is not None:
                o = o + self.p[1] * c
            return self._act(0, o) * self._act(2, c), c
        xz, xr, xh = _blocks(xw, 3)
        rz, rr, rh = _blocks(self.rb, 3)
        r_z, r_r, r_h = _blocks(self.r, 3)
        z = self._act(0, xz + F.matmul(h, r_z) + rz)
        r = self._act(0, xr + F.matmul(h, r_r) + rr)
        if self.lbr:
            n = self._act(1, xh + r * (F.matmul(h, r_h) + rh))
        else:
            n = self._act(1, xh + F.matmul(r * h, r_h) + rh)
        return (1 - z) * n + z * h, None


def _initial(args, k, d, shape, like):
    if len(args) > k and args[k] is not None:
        return F.get_item(args[k], d)
    return cuda.get_array_module(like).zeros(shape, dtype=like.dtype)


def _run_direction(cell, x, args, d, reverse, masks):
    steps, batch = x.shape[:2]
    hidden = cell.r.shape[0]
    h = _initial(args, 5, d, (batch, hidden), arr(x))
    c = _initial(args, 6, d, (batch, hidden), arr(x)) if cell.kind == "LSTM" else None
    xw = F.matmul(x, cell.w) + cell.wb
    outs = [None] * steps
    for t in (range(steps - 1, -1, -1) if reverse else range(steps)):
        new_h, new_c = cell.step(F.get_item(xw, t), h, c)
        keep = masks[t]
        h = F.where(keep, new_h, h)
        if c is not None:
            c = F.where(keep, new_c, c)
        outs[t] = F.where(keep, new_h, new_h * 0)
    return F.stack(outs, axis=0), h, c


def run_steps(node, args):
    """(Y, Y_h[, Y_c]) of an LSTM/GRU/RNN node, stepped; layouts 0 and 1."""
    a = node.attrs
    if a.get("input_forget", 0):
        raise ValueError(f"{node.op} with input_forget=1 is not supported")
    direction = a.get("direction", "forward")
    dirs = 2 if direction == "bidirectional" else 1
    batch_first = bool(a.get("layout", 0))
    x = F.transpose(args[0], (1, 0, 2)) if batch_first else args[0]
    if batch_first:
        args = list(args)
        for k in (5, 6):
            if len(args) > k and args[k] is not None:
                args[k] = F.transpose(args[k], (1, 0, 2))
    steps, batch = x.shape[:2]
    lens = np.full(batch, steps) if len(args) <= 4 or args[4] is None else \
        cuda.as_numpy(arr(args[4]))
    if lens.shape != (batch,):
        raise ValueError(f"{node.op}: sequence_lens has shape {lens.shape}, expected "
                         f"({batch},), one length per batch entry")
    xp = cuda.get_array_module(arr(x))
    masks = [xp.asarray((t < lens).reshape(batch, 1)) for t in range(steps)]
    acts = _activations(node, dirs)
    ys, hs, cs = [], [], []
    for d in range(dirs):
        cell = _Cell(node, args, d, acts[d])
        y, h, c = _run_direction(cell, x, args, d, direction == "reverse" or d == 1, masks)
        ys.append(y)
        hs.append(h)
        cs.append(c)
    y = F.stack(ys, axis=1)                     # (T, dirs, B, H)
    finals = [F.stack(hs, axis=0)] + ([F.stack(cs, axis=0)] if node.op == "LSTM" else [])
    if batch_first:
        y = F.transpose(y, (2, 0, 1, 3))
        finals = [F.transpose(s, (1, 0, 2)) for s in finals]
    return tuple([y] + finals)
