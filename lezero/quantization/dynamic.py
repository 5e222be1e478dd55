"""Dynamic quantization: int8 weights chosen once, activations quantized at run time.

``quantize_dynamic(model)`` swaps every ``nn.Linear`` for ``DynamicQuantLinear`` and every
``nn.LSTM`` for ``DynamicQuantLSTM`` (PyTorch's ``torch.ao.quantization.quantize_dynamic``).
Each call measures the input's range, quantizes it to uint8 (affine, per tensor), runs
the integer product (int32 accumulators) and scales the result back to float32 with
``s_x * s_w`` -- no calibration data is needed, and the model stays float outside.
Useful where the weights dominate: fully connected and recurrent layers at small batch.
"""
import copy

import numpy as np

import lezero.functions as F
from lezero import nn
from lezero.core import Function, Variable
from lezero.nn import Module
from lezero.quantization import ops
from lezero.quantization import reference as R
from lezero.quantization.modules import quantize_weight
from lezero.quantization.qconfig import default_weight_observer
from lezero.quantization.qparams import calculate_qparams
from lezero.utils.checks import check_float_array

__all__ = ["DynamicQuantizedLinear", "DynamicQuantLinear", "DynamicQuantLSTM",
           "quantize_dynamic"]


def _dynamic_qparams(x):
    """Per-tensor affine uint8 parameters for the range of ``x`` (0 included)."""
    lo, hi = float(x.min()) if x.size else 0.0, float(x.max()) if x.size else 0.0
    scale, zp = calculate_qparams(np.float32(lo), np.float32(hi), 0, 255,
                                  "per_tensor_affine", "quint8")
    return float(scale), int(zp)


class DynamicQuantizedLinear(Function):
    """``x @ W.T + b`` with ``x`` quantized from its own range on every call (float in,
    float out); ``w16`` is the packed int8 weight, ``w_scale`` per output channel."""

    def __init__(self, weight, w16, w_scale, bias):
        self.weight, self.w16 = weight, w16
        self.w_scale = np.asarray(w_scale, np.float32)
        self.bias = None if bias is None else np.asarray(bias, np.float32)

    def forward(self, x):
        k = x.shape[-1]
        scale, zp = _dynamic_qparams(x)
        q = R.quantize_ref(x, scale, zp, 0, 255, np.uint8)
        a = q.reshape(-1, k).astype(np.int16) - np.int16(zp)
        if ops._numba(x):
            acc = ops._kernels().gemm_acc(a, self.w16)
        else:
            acc = R.gemm_ref(a, self.w16)
        y = acc.astype(np.float32) * (np.float32(scale) * self.w_scale)
        if self.bias is not None:
            y += self.bias
        return y.reshape(x.shape[:-1] + (self.w16.shape[0],)).astype(x.dtype, copy=False)

    def backward(self, gy):
        raise NotImplementedError("DynamicQuantizedLinear runs inference only")


class DynamicQuantLinear(Module):
    """A Linear with int8 weights (``weight``, ``weight_scale``, ``weight_zero_point``)
    and float bias; float input and output."""

    def __init__(self, in_features, out_features, bias=True):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self._set(np.zeros((out_features, in_features), np.int8),
                  np.ones(out_features, np.float32), np.zeros(out_features, np.int32),
                  np.zeros(out_features, np.float32) if bias else None)

    def _set(self, w_q, w_scale, w_zp, bias):
        self.register_buffer("weight", w_q)
        self.register_buffer("weight_scale", np.asarray(w_scale, np.float32))
        self.register_buffer("weight_zero_point", np.asarray(w_zp).astype(w_q.dtype))
        self.register_buffer("bias", None if bias is None else np.asarray(bias, np.float32))
        self._packed = (None, None)

    @classmethod
    def from_float(cls, mod, weight_observer=default_weight_observer):
        new = cls(mod.in_features, mod.out_features, mod.bias is not None)
        obs = weight_observer()
        obs(mod.weight.data)
        new._set(*quantize_weight(mod.weight.data, obs),
                 None if mod.bias is None else mod.bias.data)
        return new

    def _w16(self):
        weight, w16 = self._packed
        if weight is not self.weight:              # replaced by load_state_dict
            w16 = R.pack_weight(self.weight, self.weight_zero_point)
            self._packed = (self.weight, w16)
        return w16

    def forward(self, x):
        if x.shape[-1] != self.in_features:
            raise ValueError(f"DynamicQuantLinear: expected {self.in_features} input "
                             f"features in the last dim, got shape {tuple(x.shape)}")
        return DynamicQuantizedLinear(self.weight, self._w16(), self.weight_scale,
                                      self.bias)(x)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"weight=int8 per channel")


class DynamicQuantLSTM(Module):
    """An LSTM whose input-to-hidden and hidden-to-hidden products are dynamically
    quantized (gates and states in float32).  Same arguments, parameter names (as
    ``<name>`` for DynamicQuantLinear children ``ih_l0``, ``hh_l0``, ...) and outputs as
    ``nn.LSTM``: ``(output, (h_n, c_n))``; no PackedSequence, no proj_size."""

    def __init__(self, lstm):
        super().__init__()
        if getattr(lstm, "proj_size", 0):
            raise ValueError("DynamicQuantLSTM: proj_size is not supported")
        for key in ("input_size", "hidden_size", "num_layers", "batch_first",
                    "bidirectional"):
            setattr(self, key, getattr(lstm, key))
        self.directions = 2 if lstm.bidirectional else 1
        for layer in range(self.num_layers):
            for suffix in ("", "_reverse")[:self.directions]:
                for kind in ("ih", "hh"):
                    w = getattr(lstm, f"weight_{kind}_l{layer}{suffix}")
                    b = getattr(lstm, f"bias_{kind}_l{layer}{suffix}", None)
                    lin = nn.Linear(w.shape[1], w.shape[0], bias=b is not None)
                    lin.weight = w
                    if b is not None:
                        lin.bias = b
                    self.add_module(f"{kind}_l{layer}{suffix}",
                                    DynamicQuantLinear.from_float(lin))

    @classmethod
    def from_float(cls, mod):
        return cls(mod)

    def _direction(self, x, h, c, layer, suffix, reverse):
        ih, hh = self._modules[f"ih_l{layer}{suffix}"], self._modules[f"hh_l{layer}{suffix}"]
        steps, n = x.shape[0], x.shape[1]
        xw = ih(F.reshape(x, (steps * n, -1)))
        xw = F.reshape(xw, (steps, n, -1))
        outs = [None] * steps
        hs = self.hidden_size
        for t in (range(steps - 1, -1, -1) if reverse else range(steps)):
            gates = xw[t] + hh(h)
            i, f = F.sigmoid(gates[:, :hs]), F.sigmoid(gates[:, hs:2 * hs])
            g, o = F.tanh(gates[:, 2 * hs:3 * hs]), F.sigmoid(gates[:, 3 * hs:])
            c = f * c + i * g
            h = o * F.tanh(c)
            outs[t] = h
        return F.stack(outs, axis=0), h, c

    def _check(self, input, hx):
        """The checks ``nn.LSTM`` makes, before any product runs: a float (T, N, I) /
        (N, T, I) / (T, I) input and, when given, ``hx = (h_0, c_0)`` of the state's shape.
        A PackedSequence is refused (this layer runs padded batches only)."""
        where = "DynamicQuantLSTM"
        if isinstance(input, F.PackedSequence):
            raise TypeError(f"{where}: input is a PackedSequence, which this layer does not "
                            "take; pad it first (pad_packed_sequence)")
        arr = check_float_array(where, "input", input)
        if arr.ndim not in (2, 3) or arr.shape[-1] != self.input_size or 0 in arr.shape:
            raise ValueError(f"{where}: input must be a non-empty (T, N, {self.input_size}) "
                             f"(batch_first: (N, T, {self.input_size})) or (T, "
                             f"{self.input_size}) array, got shape {arr.shape}")
        if hx is None:
            return
        if not isinstance(hx, (tuple, list)) or len(hx) != 2:
            raise TypeError(f"{where}: hx must be a tuple (h_0, c_0) or None, got "
                            f"{type(hx).__name__}")
        n = 1 if arr.ndim == 2 else arr.shape[0 if self.batch_first else 1]
        want = (self.num_layers * self.directions, n, self.hidden_size)
        want = want[::2] if arr.ndim == 2 else want
        for name, h in zip(("h_0", "c_0"), hx):
            check_float_array(where, name, h, shape=want)

    def forward(self, input, hx=None):
        self._check(input, hx)
        x = input if isinstance(input, Variable) else Variable(input, requires_grad=False)
        unbatched = x.ndim == 2
        if unbatched:
            x = F.expand_dims(x, 1)
        elif self.batch_first:
            x = F.swapaxes(x, 0, 1)
        n, hs = x.shape[1], self.hidden_size
        slots = self.num_layers * self.directions
        if hx is None:
            zeros = np.zeros((slots, n, hs), x.dtype)
            hx = (zeros, zeros)
        h0, c0 = hx
        if unbatched:
            h0, c0 = F.expand_dims(h0, 1), F.expand_dims(c0, 1)
        hn, cn = [], []
        for layer in range(self.num_layers):
            outs = []
            for d, suffix in enumerate(("", "_reverse")[:self.directions]):
                k = layer * self.directions + d
                y, h, c = self._direction(x, h0[k], c0[k], layer, suffix, reverse=d == 1)
                outs.append(y)
                hn.append(h)
                cn.append(c)
            x = outs[0] if len(outs) == 1 else F.concatenate(outs, axis=2)
        h_n, c_n = F.stack(hn, axis=0), F.stack(cn, axis=0)
        if unbatched:
            return F.squeeze(x, 1), (F.squeeze(h_n, 1), F.squeeze(c_n, 1))
        return (F.swapaxes(x, 0, 1) if self.batch_first else x), (h_n, c_n)


_DYNAMIC = {nn.Linear: DynamicQuantLinear, nn.LSTM: DynamicQuantLSTM}


def quantize_dynamic(model, qconfig_spec=None, inplace=False):
    """``model`` with its Linear and LSTM layers (or the types in ``qconfig_spec``, a set
    drawn from {nn.Linear, nn.LSTM}) dynamically quantized; a copy unless ``inplace``."""
    types = set(_DYNAMIC) if qconfig_spec is None else set(qconfig_spec)
    unknown = types - set(_DYNAMIC)
    if unknown:
        raise ValueError(f"quantize_dynamic: only nn.Linear and nn.LSTM have dynamic "
                         f"versions, got {sorted(t.__name__ for t in unknown)}")
    if not isinstance(model, Module):
        raise TypeError(f"quantize_dynamic: model must be an nn.Module, got "
                        f"{type(model).__name__}")
    if type(model) in types:
        return _DYNAMIC[type(model)].from_float(model)
    if not inplace:
        model = copy.deepcopy(model)
    for parent in list(model.modules()):
        for name, child in list(parent._modules.items()):
            if child is not None and type(child) in types:
                setattr(parent, name, _DYNAMIC[type(child)].from_float(child))
    return model.eval()
