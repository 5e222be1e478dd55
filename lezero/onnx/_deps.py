"""The optional packages behind ``lezero.onnx``, imported only when used."""

__all__ = ["onnx", "onnxruntime", "INSTALL_HINT"]

INSTALL_HINT = "install the ONNX extra: pip install -e '.[onnx]'"


def onnx():
    """The ``onnx`` package (absolute import: ``lezero.onnx`` is not it)."""
    try:
        import onnx as module
    except ImportError as e:
        raise ImportError(f"lezero.onnx needs the onnx package ({e}); {INSTALL_HINT}") from None
    return module


def onnxruntime():
    try:
        import onnxruntime as module
    except ImportError as e:
        raise ImportError(f"lezero.onnx needs onnxruntime to validate exports ({e}); "
                          f"{INSTALL_HINT}") from None
    return module
