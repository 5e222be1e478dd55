"""Run the exported model zoo on TensorRT and compare with LeZero (a prepared device check).

    python tools/trt_check.py [--models gpt2,bert,...] [--rtol 1e-3]

Needs a CUDA GPU, the ``tensorrt`` Python package (8.6 or 10.x) and CuPy; without them it
says which is missing and exits with status 2 (it is not part of ``make test``).  Each
model of tests/jit/zoo.py and tests/onnx/test_export_dynamic.py is exported with
``lezero.onnx.export`` (dynamic axes, validated on onnxruntime's CPU provider), parsed by
TensorRT's ONNX parser, built in float32 (TF32 off) with one optimisation profile from the
example to twice the grown sizes, run at the example and the grown sizes, and compared
with eager LeZero on the CPU.  One line per model; exit status 1 when any model fails.
"""
import argparse
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _requirements():
    """(tensorrt, cupy) or a sentence saying what is missing."""
    try:
        import tensorrt as trt
    except ImportError as e:
        return f"TensorRT is missing ({e}): pip install tensorrt (needs a CUDA GPU)"
    try:
        import cupy as cp
        if cp.cuda.runtime.getDeviceCount() < 1:
            return "no CUDA GPU is visible (cupy sees 0 devices)"
    except Exception as e:              # ImportError, or a CUDA driver error
        return f"no usable CUDA GPU through CuPy ({type(e).__name__}: {e})"
    return trt, cp


def _zoo():
    from tests.jit import zoo as jit_zoo
    from tests.onnx import test_export_dynamic as dyn_zoo
    models = {k: (jit_zoo.build, jit_zoo.ZOO[k][2]) for k in jit_zoo.ZOO}
    models.update({k: (dyn_zoo.build, dyn_zoo.DYNAMIC_ZOO[k][2]) for k in dyn_zoo.DYNAMIC_ZOO})
    return models


def build_engine(trt, data, shapes):
    """A float32 engine for the ONNX bytes; ``shapes``: {input: (min, opt, max)}."""
    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    flags = 0 if int(trt.__version__.split(".")[0]) >= 10 else \
        1 << int(trt.NetworkDefinitionCreationFlag.EXPLICIT_BATCH)
    network = builder.create_network(flags)
    parser = trt.OnnxParser(network, logger)
    if not parser.parse(data):
        errors = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
        raise RuntimeError(f"TensorRT's ONNX parser refused the file: {errors}")
    config = builder.create_builder_config()
    config.clear_flag(trt.BuilderFlag.TF32)
    profile = builder.create_optimization_profile()
    for name, (lo, opt, hi) in shapes.items():
        profile.set_shape(name, lo, opt, hi)
    config.add_optimization_profile(profile)
    serialized = builder.build_serialized_network(network, config)
    if serialized is None:
        raise RuntimeError("TensorRT could not build an engine (see its log above)")
    return trt.Runtime(logger).deserialize_cuda_engine(serialized)


def run_engine(trt, cp, engine, feed):
    """The engine's outputs (NumPy, in engine order) for the inputs ``feed``."""
    context = engine.create_execution_context()
    names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
    inputs = [n for n in names if engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT]
    keep = {}
    for name in inputs:
        dtype = trt.nptype(engine.get_tensor_dtype(name))
        keep[name] = cp.asarray(np.ascontiguousarray(feed[name].astype(dtype)))
        context.set_input_shape(name, feed[name].shape)
    outputs = [n for n in names if n not in inputs]
    for name in outputs:
        dtype = trt.nptype(engine.get_tensor_dtype(name))
        keep[name] = cp.empty(tuple(context.get_tensor_shape(name)), dtype=dtype)
    for name, array in keep.items():
        context.set_tensor_address(name, array.data.ptr)
    stream = cp.cuda.Stream()
    context.execute_async_v3(stream.ptr)
    stream.synchronize()
    return [cp.asnumpy(keep[n]) for n in outputs]


def check_model(trt, cp, name, build, dynamic_axes, rtol):
    """(sizes checked, max |TensorRT - LeZero|) for one zoo model."""
    import lezero as lz
    from lezero import onnx as lonnx
    from lezero.onnx.export_trace import grown
    from lezero.onnx.validate import leaf_arrays
    model, xs = build(name)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, f"{name}.onnx")
        report = lonnx.export(model, tuple(xs), path, dynamic_axes=dynamic_axes)
        with open(path, "rb") as f:
            data = f.read()
    names, dyn = report.input_names, {k: v for k, v in dynamic_axes.items()}
    once, twice = grown(xs, names, dyn), grown(xs, names, dyn, times=2)
    shapes = {n: (np.shape(a), np.shape(b), np.shape(c)) for n, a, b, c in
              zip(names, xs, once, twice)}
    engine = build_engine(trt, data, shapes)
    worst, sizes = 0.0, []
    for case in (xs, once):
        got = run_engine(trt, cp, engine, dict(zip(names, case)))
        with lz.no_grad():
            ref = leaf_arrays(model(*case))
        for g, r in zip(got, ref):
            diff = float(np.max(np.abs(g.astype(np.float64) - r))) if r.size else 0.0
            if diff > 1e-4 + rtol * float(np.max(np.abs(r))):
                raise RuntimeError(f"TensorRT differs from LeZero by {diff:.3g}")
            worst = max(worst, diff)
        sizes.append([tuple(np.shape(a)) for a in case])
    return sizes, worst


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="", help="comma-separated zoo names (all)")
    parser.add_argument("--rtol", type=float, default=1e-3)
    args = parser.parse_args(argv)
    found = _requirements()
    if isinstance(found, str):
        print(f"trt_check: {found}; nothing was run.")
        return 2
    trt, cp = found
    zoo = _zoo()
    chosen = [m for m in args.models.split(",") if m] or sorted(zoo)
    failed = 0
    print(f"TensorRT {trt.__version__}; {len(chosen)} models")
    for name in chosen:
        build, dynamic_axes = zoo[name]
        try:
            sizes, worst = check_model(trt, cp, name, build, dynamic_axes, args.rtol)
            print(f"{name:28s} ok    max |TensorRT - LeZero| {worst:.2e}  inputs {sizes}")
        except Exception as e:          # report every model, then fail at the end
            failed += 1
            print(f"{name:28s} FAIL  {type(e).__name__}: {str(e)[:200]}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
