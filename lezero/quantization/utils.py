"""Helpers around converted models: their size, loading one from a file, ONNX export."""
import numpy as np

from lezero import cuda

__all__ = ["model_size", "load_quantized", "export_onnx"]


def model_size(model):
    """Bytes of the model's ``state_dict`` arrays (what ``lz.save`` stores, less the
    container's overhead): INT8 weights count one byte each."""
    return int(sum(np.asarray(cuda.as_numpy(a)).nbytes for a in model.state_dict().values()))


def load_quantized(float_model, path_or_state, prepare_fn=None):
    """A converted model read from ``lz.save(int8.state_dict(), path)`` (or a state
    dict): ``float_model`` (the architecture, with its stubs and fusions applied as for
    the saved model) is prepared (``prepare_fn``, default ``prepare``) and converted
    without calibration into a skeleton, which then loads the scales, zero points and
    integer weights (strictly)."""
    from lezero.quantization.flows import convert, prepare
    from lezero.utils.serialization import load
    state = load(path_or_state) if isinstance(path_or_state, str) else path_or_state
    skeleton = convert((prepare_fn or prepare)(float_model), warn=False)
    skeleton.load_state_dict(state, strict=True)
    return skeleton


def _last_output_scale(model, args):
    """The scale of the last DeQuantize's input on a run of ``args`` (one output step)."""
    from lezero.core import no_grad
    from lezero.quantization.modules import DeQuantize
    from lezero.quantization.qtensor import qparams_of
    scales = []
    handles = [m.register_forward_pre_hook(
        lambda mod, a: scales.append(qparams_of(a[0])[0]) and None)
        for m in model.modules() if isinstance(m, DeQuantize)]
    with no_grad():
        model(*args)
    for h in handles:
        h.remove()
    return max(scales) if scales else 0.0


def export_onnx(model, args, path, opset_version=17, steps=1.0, **kwargs):
    """``lezero.onnx.export`` of a converted model in QDQ form (QuantizeLinear /
    DequantizeLinear around float operators, which onnxruntime fuses into its integer
    kernels), validated against LeZero's integer model within ``steps`` output
    quantization steps (onnxruntime rounds in float where LeZero uses fixed point)."""
    from lezero.onnx import export
    args = args if isinstance(args, (tuple, list)) else (args,)
    step = _last_output_scale(model, args)
    kwargs.setdefault("atol", steps * step * 1.001 + 1e-6)
    kwargs.setdefault("rtol", 0.0)
    return export(model, tuple(args), path, opset_version=opset_version, **kwargs)
