"""Which layers suffer from quantization, and keeping those in float.

``sensitivity_report(prepared, batches)`` runs a calibrated prepared model (a copy: its
observers do not move) and, for every observed layer, compares its float output ``y``
with the output ``y_q`` of the same layer computed the INT8 way in simulation: input
fake quantized per tensor (from its own range), weight fake quantized with the layer's
weight observer, output fake quantized with the layer's calibrated scale and zero point.

    SQNR   = 10 log10(sum y^2 / sum (y - y_q)^2)   dB, higher is better (~6 dB per bit)
    cosine = <y, y_q> / (|y| |y_q|)

plus the weight's own SQNR and the observed output range.  ``keep_float(prepared,
names)`` marks layers to stay float: ``convert`` turns each into a ``FloatFallback``
(dequantize the input, run the float layer, quantize the output with its calibrated
parameters), so the layers around it stay INT8.  ``keep_most_sensitive(prepared,
report, k)`` keeps the ``k`` layers of lowest SQNR.
"""
import copy

import numpy as np

from lezero import cuda
from lezero.core import Variable, no_grad
from lezero.nn import Module
from lezero.quantization.fake_quant import (FakeQuantizeBase, disable_fake_quant,
                                            disable_observer, fake_quantize)
from lezero.quantization.observers import MinMaxObserver
from lezero.quantization.qtensor import is_quantized, make_qtensor, qparams_of
from lezero.utils.checks import check_int

__all__ = ["SensitivityReport", "sensitivity_report", "keep_float", "keep_most_sensitive",
           "FloatFallback", "sqnr", "cosine"]


def sqnr(reference, approx):
    """Signal-to-quantization-noise ratio in dB (inf when equal)."""
    ref = np.asarray(reference, np.float64)
    noise = float(np.sum((ref - np.asarray(approx, np.float64)) ** 2))
    signal = float(np.sum(ref ** 2))
    return float("inf") if noise == 0 else 10 * np.log10(max(signal, 1e-30) / noise)


def cosine(a, b):
    a, b = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    den = np.linalg.norm(a) * np.linalg.norm(b)
    return 1.0 if den == 0 else float(a @ b / den)


class FloatFallback(Module):
    """A layer kept in float inside an INT8 model (see the module docstring).  Accepts
    quantized or float input; returns a quantized tensor at ``scale``/``zero_point``."""

    def __init__(self, module, scale, zero_point, dtype, quant_min, quant_max):
        super().__init__()
        self.module = module
        self.register_buffer("scale", np.array(scale, np.float32))
        self.register_buffer("zero_point", np.array(zero_point, np.int32))
        self.dtype, self.qrange = np.dtype(dtype), (quant_min, quant_max)

    @classmethod
    def from_float(cls, mod):
        from lezero.quantization.modules import output_qparams
        observer = mod._modules.get("activation_post_process")
        if observer is None:
            raise ValueError(f"keep_float: {type(mod).__name__} has no output observer")
        params = output_qparams(observer)
        mod = copy.deepcopy(mod)
        del mod._modules["activation_post_process"]
        for key, hook in list(mod._forward_hooks.items()):
            if getattr(hook, "__name__", "") == "_observe_output":
                del mod._forward_hooks[key]
        for m in mod.modules():
            if isinstance(m, FakeQuantizeBase):     # a QAT layer: its float weights
                m.disable_fake_quant()
                m.disable_observer()
        object.__setattr__(mod, "keep_float", False)
        return cls(mod, *params)

    def forward(self, x):
        from lezero.quantization.ops import DequantizePerTensor, QuantizePerTensor
        if is_quantized(x):
            x = DequantizePerTensor(*qparams_of(x))(x)
        y = self.module(x)
        s, z = float(self.scale), int(self.zero_point)
        return make_qtensor(QuantizePerTensor(s, z, *self.qrange, self.dtype)(y), s, z)


def _array(x):
    return cuda.as_numpy(x.data if isinstance(x, Variable) else x)


def _observed_layers(model):
    from lezero.quantization.stubs import QuantStub
    return [(name, m) for name, m in model.named_modules()
            if "activation_post_process" in m._modules and not isinstance(m, QuantStub)
            and _weight_layer(m) is not None]


def _weight_layer(m):
    """The module holding the weight of an observed layer (itself, or a fused run's
    first entry)."""
    if getattr(m, "weight", None) is not None and not isinstance(m.weight, np.ndarray):
        return m
    first = m._modules.get("0")
    return first if getattr(first, "weight", None) is not None else None


def _fake_quant_weight(w, observer_factory):
    obs = observer_factory()
    obs(w)
    scale, zp = obs.calculate_qparams()
    axis = getattr(obs, "ch_axis", None) if obs.per_channel else None
    return fake_quantize(w, scale, zp, obs.quant_min, obs.quant_max, axis).data


def _simulate(m, x):
    """The layer's output with its input and weight fake quantized (float arrays)."""
    obs = MinMaxObserver()
    obs(x)
    s, z = obs.calculate_qparams()
    xq = fake_quantize(x, s, z, obs.quant_min, obs.quant_max)
    fq = m._modules.get("weight_fake_quant")
    if isinstance(fq, FakeQuantizeBase):             # QAT layers quantize their weight
        fq.enable_fake_quant()
        return _array(m.forward(xq)), None
    layer = _weight_layer(m)
    w = layer.weight.data
    wq = _fake_quant_weight(w, m.qconfig.weight)
    layer.weight.data = wq
    try:
        return _array(m.forward(xq)), sqnr(w, wq)
    finally:
        layer.weight.data = w


class SensitivityReport:
    """Per layer: ``name``, ``type``, ``sqnr_db``, ``cosine``, ``weight_sqnr_db``,
    ``min_val``/``max_val`` (observed output range), ``scale``, ``zero_point``."""

    def __init__(self, rows):
        self.rows = rows

    def most_sensitive(self, k=1):
        """The names of the ``k`` layers of lowest SQNR."""
        return [r["name"] for r in sorted(self.rows, key=lambda r: r["sqnr_db"])[:k]]

    def __str__(self):
        head = (f"{'layer':<28}{'type':<16}{'SQNR dB':>9}{'cosine':>9}{'w SQNR':>9}"
                f"{'range':>22}{'scale':>10}{'zp':>5}")
        lines = [head]
        for r in self.rows:
            wq = "" if r["weight_sqnr_db"] is None else f"{r['weight_sqnr_db']:.1f}"
            rng = f"[{r['min_val']:.3g}, {r['max_val']:.3g}]"
            lines.append(f"{r['name']:<28}{r['type']:<16}{r['sqnr_db']:>9.1f}"
                         f"{r['cosine']:>9.5f}{wq:>9}{rng:>22}{r['scale']:>10.4g}"
                         f"{r['zero_point']:>5}")
        return "\n".join(lines)

    __repr__ = __str__

    def plot(self, ax=None):
        """A bar chart of the SQNR per layer (matplotlib); returns the axes."""
        if ax is None:
            import matplotlib.pyplot as plt
            ax = plt.subplots(figsize=(7, 3))[1]
        names = [r["name"] for r in self.rows]
        ax.bar(range(len(names)), [r["sqnr_db"] for r in self.rows], color="tab:blue")
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels(names, rotation=45, ha="right", fontsize=8)
        ax.set_ylabel("SQNR (dB)")
        ax.set_title("per-layer quantization sensitivity (lower = more sensitive)")
        return ax


def _capture(work, layers, batches, max_batches):
    seen = {name: ([], []) for name, _ in layers}
    handles = []
    for name, m in layers:
        ins, outs = seen[name]
        handles.append(m.register_forward_pre_hook(
            lambda mod, args, ins=ins: ins.append(_array(args[0])) and None))
        handles.append(m.register_forward_hook(
            lambda mod, args, out, outs=outs: outs.append(_array(out)) and None))
    with no_grad():
        for i, batch in enumerate(batches):
            if i >= max_batches:
                break
            work(batch[0] if isinstance(batch, (tuple, list)) else batch)
    for h in handles:
        h.remove()
    return seen


def sensitivity_report(prepared, batches, max_batches=2):
    """A ``SensitivityReport`` of a calibrated prepared (or QAT-prepared) model on the
    first ``max_batches`` of ``batches`` (see the module docstring)."""
    max_batches = check_int("sensitivity_report", "max_batches", max_batches, low=1)
    layers = _observed_layers(prepared)
    if not layers:
        raise ValueError("sensitivity_report: the model has no observed layers; pass a "
                         "model from quantization.prepare (or prepare_qat)")
    work = copy.deepcopy(prepared).eval()
    disable_fake_quant(work)
    disable_observer(work)
    work_layers = dict(_observed_layers(work))
    seen = _capture(work, [(n, work_layers[n]) for n, _ in layers], batches, max_batches)
    rows = []
    with no_grad():
        for name, m in layers:
            ins, outs = seen[name]
            if not ins:
                continue
            obs = m.activation_post_process
            obs = obs.activation_post_process if isinstance(obs, FakeQuantizeBase) else obs
            s, z = m.activation_post_process.calculate_qparams()
            x, y = np.concatenate(ins), np.concatenate(outs)
            y_sim, w_sqnr = _simulate(work_layers[name], x)
            y_q = fake_quantize(y_sim, s, z, obs.quant_min, obs.quant_max).data
            rows.append({"name": name, "type": type(m).__name__, "sqnr_db": sqnr(y, y_q),
                         "cosine": cosine(y, y_q), "weight_sqnr_db": w_sqnr,
                         "min_val": float(np.min(obs.min_val)),
                         "max_val": float(np.max(obs.max_val)),
                         "scale": float(np.asarray(s).reshape(-1)[0]),
                         "zero_point": int(np.asarray(z).reshape(-1)[0])})
    return SensitivityReport(rows)


def keep_float(prepared, names):
    """Mark the named observed layers of a prepared model to stay float through
    ``convert`` (as ``FloatFallback``); returns the model (changed in place)."""
    for name in names:
        m = prepared
        for part in name.split("."):
            if part not in m._modules:
                raise KeyError(f"keep_float: the model has no layer {name!r}")
            m = m._modules[part]
        if "activation_post_process" not in m._modules:
            raise ValueError(f"keep_float: {name!r} ({type(m).__name__}) has no output "
                             "observer; only observed layers (Linear, Conv2d, fused runs) "
                             "can be kept in float")
        object.__setattr__(m, "keep_float", True)
    return prepared


def keep_most_sensitive(prepared, report, k=1):
    """``keep_float`` for the ``k`` layers of lowest SQNR in ``report``."""
    return keep_float(prepared, report.most_sensitive(check_int("keep_most_sensitive", "k",
                                                                k, low=0)))
