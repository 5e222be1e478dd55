"""Validation of an export: a runtime (onnxruntime, OpenVINO's CPU plugin) against eager
LeZero, output by output."""
import os
import tempfile

import numpy as np

from lezero import cuda
from lezero.core import Variable
from lezero.onnx._deps import onnxruntime

__all__ = ["ExportReport", "validate_model", "session_options", "ort_session", "leaf_arrays",
           "RUNTIMES", "check_runtimes", "runtime_runner", "openvino_runner"]

RUNTIMES = ("onnxruntime", "openvino")


class ExportReport:
    """What ``onnx.export`` wrote and how it compared with LeZero.

    ``max_abs_diff``: {output name: largest absolute difference over the validated input
    sets and runtimes}; ``runtime_diff``: {runtime: {output name: difference}};
    ``cases``: the input shapes validated; ``ops``: the ONNX operator types used."""

    def __init__(self, path, opset, input_names, output_names, proto):
        self.path, self.opset = path, opset
        self.input_names, self.output_names = list(input_names), list(output_names)
        self.ops = sorted({n.op_type for n in proto.graph.node})
        self.n_nodes = len(proto.graph.node)
        self.max_abs_diff, self.cases, self.runtime_diff = {}, [], {}

    def __str__(self):
        lines = [f"ONNX export {self.path} (opset {self.opset}, {self.n_nodes} nodes, "
                 f"{len(self.ops)} operator types)"]
        for name in self.output_names:
            diff = self.max_abs_diff.get(name)
            per = [f"max |{rt} - LeZero| = {d[name]:.3g}"
                   for rt, d in self.runtime_diff.items() if name in d]
            text = "not validated" if diff is None else "; ".join(per)
            lines.append(f"  {name}: {text}")
        if self.cases:
            lines.append("  validated on input shapes " + "; ".join(map(str, self.cases)))
        return "\n".join(lines)

    __repr__ = __str__


def session_options(threads=None):
    """onnxruntime ``SessionOptions`` for LeZero's integer models: exact int8 arithmetic.

    On x86 CPUs with AVX2 but without VNNI, onnxruntime's uint8 x int8 kernels (the
    QLinearConv / QLinearMatMul that a QDQ graph is fused into) add products in pairs into
    int16 and saturate: an int8 model's output drifts by many quantization steps
    (measured: 7 steps on a QDQ CNN, 0.16 on a dynamic linear layer's output, on an AMD
    EPYC without VNNI, onnxruntime 1.32).  ``session.x64quantprecision`` makes onnxruntime
    use its exact (slower) path there; it changes nothing elsewhere.  ``threads`` sets
    the intra- and inter-op thread counts."""
    ort = onnxruntime()
    opts = ort.SessionOptions()
    opts.add_session_config_entry("session.x64quantprecision", "1")
    if threads:
        opts.intra_op_num_threads = opts.inter_op_num_threads = int(threads)
    return opts


def ort_session(model_bytes):
    """An onnxruntime CPU session for serialized model bytes (one thread per op, so that
    a test does not oversubscribe a shared machine; exact int8, see ``session_options``)."""
    return onnxruntime().InferenceSession(model_bytes, session_options(threads=1),
                                          providers=["CPUExecutionProvider"])


def leaf_arrays(out):
    """The arrays of the Variables in a (nested) model output, in order."""
    from lezero.jit.tracer import flatten_outputs
    leaves = []
    flatten_outputs(out, leaves)
    return [np.asarray(cuda.as_numpy(v.data)) for v in leaves]


def check_runtimes(check):
    """The runtimes named by ``check``: None (none), one name, or a list of names."""
    if check is None:
        return ()
    names = (check,) if isinstance(check, str) else tuple(check)
    bad = [n for n in names if n not in RUNTIMES]
    if bad or not names:
        raise ValueError(f"onnx.export: check must be None, one of {RUNTIMES} or a list of "
                         f"them, got {check!r}")
    return names


def openvino_runner(model_bytes):
    """run(feed, output_names) on OpenVINO's CPU plugin in float32 precision (one
    inference thread); the file goes through a temporary directory."""
    try:
        import openvino as ov
    except ImportError as e:
        raise ImportError(f"onnx.export(check='openvino') needs the openvino package ({e}); "
                          "pip install openvino") from None
    core = ov.Core()
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "model.onnx")
        with open(path, "wb") as f:
            f.write(model_bytes)
        model = core.read_model(path)
    compiled = core.compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32",
                                                 "INFERENCE_NUM_THREADS": 1})
    order = {out.get_any_name(): k for k, out in enumerate(compiled.outputs)}

    def run(feed, output_names):
        result = compiled(feed)
        return [np.asarray(result[order.get(name, k)]) for k, name in enumerate(output_names)]
    return run


def runtime_runner(runtime, model_bytes):
    """run(feed, output_names) -> arrays, for ``runtime`` (one of ``RUNTIMES``)."""
    if runtime == "openvino":
        return openvino_runner(model_bytes)
    session = ort_session(model_bytes)
    return lambda feed, output_names: session.run(output_names, feed)


def validate_model(model_bytes, fn, cases, input_names, output_names, report, rtol, atol,
                   runtimes=("onnxruntime",)):
    """Run every input set through each runtime and ``fn``; fill ``report`` and raise
    ``ExportError`` when an output differs beyond ``atol + rtol * max|reference|``."""
    runners = {rt: runtime_runner(rt, model_bytes) for rt in runtimes}
    for case in cases:
        feed = {n: np.asarray(cuda.as_numpy(a.data if isinstance(a, Variable) else a))
                for n, a in zip(input_names, case)}
        ref = leaf_arrays(fn(*case))
        report.cases.append([tuple(v.shape) for v in feed.values()])
        for rt, run in runners.items():
            _compare(rt, run(feed, output_names), ref, output_names, report, rtol, atol)
    return report


def _compare(runtime, got, ref, output_names, report, rtol, atol):
    from lezero.onnx.context import ExportError
    diffs = report.runtime_diff.setdefault(runtime, {})
    for name, g, r in zip(output_names, got, ref):
        if g.shape != r.shape:
            raise ExportError(f"onnx.export: output {name!r} has shape {g.shape} in "
                              f"{runtime} but {r.shape} in LeZero (inputs {report.cases[-1]})")
        diff = float(np.max(np.abs(g.astype(np.float64) - r))) if r.size else 0.0
        diffs[name] = max(diffs.get(name, 0.0), diff)
        report.max_abs_diff[name] = max(report.max_abs_diff.get(name, 0.0), diff)
        scale = float(np.max(np.abs(r))) if r.size else 0.0
        if not diff <= atol + rtol * scale:
            raise ExportError(f"onnx.export: {runtime} and LeZero differ on output {name!r} "
                              f"by {diff:.3g} (tolerance {atol + rtol * scale:.3g}, inputs "
                              f"{report.cases[-1]})\n{report}")
