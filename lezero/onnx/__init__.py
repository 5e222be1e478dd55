"""``lezero.onnx``: export a LeZero model to ONNX, and load an ONNX model into LeZero.

    from lezero import onnx
    report = onnx.export(model, x, "model.onnx", dynamic_axes={"input_0": {0: "batch"}})
    net = onnx.load("model.onnx")        # an nn.Module: runs and fine-tunes

The ``onnx`` and ``onnxruntime`` packages (``pip install -e ".[onnx]"``) are imported only
inside these functions.  See ``docs/onnx.md``.
"""
from lezero.onnx.context import ExportError

__all__ = ["export", "load", "session_options", "ExportError", "OnnxImportError", "coverage",
           "rules"]


def export(model, args, path, opset_version=17, input_names=None, output_names=None,
           dynamic_axes=None, **kwargs):
    """Export ``model(*args)`` to ONNX at ``path`` (see ``lezero.onnx.exporter.export``);
    ``check="openvino"`` (or ``["onnxruntime", "openvino"]``, or None) picks the runtimes
    the file is validated on."""
    from lezero.onnx.exporter import export as _export
    return _export(model, args, path, opset_version, input_names, output_names,
                   dynamic_axes, **kwargs)


def load(path):
    """An ``nn.Module`` running the ONNX model at ``path`` (initializers as Parameters)."""
    from lezero.onnx.importer import load as _load
    return _load(path)


def session_options(threads=None):
    """onnxruntime ``SessionOptions`` that keep int8 models exact on every x86 CPU
    (see ``lezero.onnx.validate.session_options``): pass them to ``InferenceSession``."""
    from lezero.onnx.validate import session_options as _options
    return _options(threads)


def rules():
    """{Function class name: OnnxRule}: the export mapping table."""
    from lezero.onnx.registry import load_rules
    return dict(load_rules())


def coverage():
    """Rows of the export coverage table (see ``lezero.onnx.coverage_table``)."""
    from lezero.onnx.coverage_table import coverage_rows
    return coverage_rows()


def __getattr__(name):
    if name == "OnnxImportError":
        from lezero.onnx.importer import OnnxImportError
        return OnnxImportError
    raise AttributeError(f"module 'lezero.onnx' has no attribute {name!r}")
