"""ONNX files served through onnxruntime directly (no LeZero graph in between).

A file onnxruntime cannot load (corrupt, an unknown operator, external data outside
the model's folder, which onnxruntime refuses) raises ``ValueError`` naming the file."""
from lezero.serving.model import ServedModel, TensorSpec

__all__ = ["OnnxRunner", "load_onnx"]

# onnxruntime's type strings -> the protocol's datatypes
_ORT_TYPES = {"tensor(bool)": "BOOL", "tensor(uint8)": "UINT8", "tensor(uint16)": "UINT16",
              "tensor(uint32)": "UINT32", "tensor(uint64)": "UINT64", "tensor(int8)": "INT8",
              "tensor(int16)": "INT16", "tensor(int32)": "INT32", "tensor(int64)": "INT64",
              "tensor(float16)": "FP16", "tensor(float)": "FP32", "tensor(double)": "FP64",
              "tensor(string)": "BYTES"}


class OnnxRunner:
    """Calls an onnxruntime session with batches; returns ``{output name: array}``."""

    def __init__(self, session):
        self.session = session
        self.input_names = [i.name for i in session.get_inputs()]
        self.output_names = [o.name for o in session.get_outputs()]

    def __call__(self, *batches):
        outputs = self.session.run(self.output_names, dict(zip(self.input_names, batches)))
        return dict(zip(self.output_names, outputs))

    def __repr__(self):
        return f"OnnxRunner(inputs={self.input_names}, outputs={self.output_names})"


def _spec(arg, path):
    if arg.type not in _ORT_TYPES:
        raise ValueError(f"load_model: {path!r}: {arg.name!r} has type {arg.type}, which "
                         "the server cannot carry")
    dims = [d if isinstance(d, int) and d >= 0 else -1 for d in (arg.shape or [])]
    return TensorSpec(arg.name, _ORT_TYPES[arg.type], tuple(dims[1:])), (dims or [-1])[0]


def load_onnx(path, providers=None, threads=None):
    """A ``ServedModel`` running ``path`` in an onnxruntime ``InferenceSession``.

    The first axis of every input and output is the batch axis: export with it dynamic
    (``dynamic_axes``); a graph fixed to batch 1 is served without batching."""
    try:
        import onnxruntime as ort
    except ImportError:
        raise ImportError("serving ONNX files needs onnxruntime: pip install -e '.[onnx]'"
                          ) from None
    from lezero.onnx.validate import session_options
    options = session_options()          # exact int8 arithmetic on AVX2 CPUs too
    if threads:
        options.intra_op_num_threads = int(threads)
    try:
        session = ort.InferenceSession(path, sess_options=options,
                                       providers=providers or ["CPUExecutionProvider"])
    except Exception as exc:             # onnxruntime's own types (Fail, InvalidGraph...)
        raise ValueError(f"load_model: onnxruntime cannot load {path!r}: "
                         f"{type(exc).__name__}: {' '.join(str(exc).split())}") from None
    inputs = [_spec(a, path) for a in session.get_inputs()]
    outputs = [_spec(a, path) for a in session.get_outputs()]
    batch_dims = {b for _, b in inputs}
    extra = {}
    if batch_dims == {1}:
        extra["max_batch_size"] = 1
    elif batch_dims != {-1}:
        raise ValueError(f"load_model: {path!r} fixes the batch axis to {sorted(batch_dims)}; "
                         "export it with a dynamic first axis (dynamic_axes) to serve it")
    return ServedModel(OnnxRunner(session), [s for s, _ in inputs], [s for s, _ in outputs],
                       platform="onnxruntime_onnx", **extra)
