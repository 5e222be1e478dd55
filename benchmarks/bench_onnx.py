"""ONNX: the exported models in onnxruntime beside LeZero and PyTorch, and the export
coverage of the operator registry.

    python benchmarks/bench_onnx.py          # BENCH_THREADS=n, BENCH_ROUNDS=n
    python benchmarks/bench_onnx.py --record # also docs/figures/bench_onnx.md and its blocks

Each case (MLP at batch 1 and 64, LeNet-5 at batch 8, ResNet-18 at batch 2, GPT-mini
forward on 4 x 64 tokens)
is exported with ``lezero.onnx.export`` (validated against LeZero), then LeZero eager,
the LeZero static graph with fusion, onnxruntime (CPU, the same thread count), PyTorch
eager and ``torch.jit.trace`` run in alternating rounds; printed are best times and the
ratios of onnxruntime to LeZero eager and to PyTorch eager.  Last, the share of
registered operators whose probe exports and matches onnxruntime.
"""
import os
import sys
import tempfile


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _record import run_main  # noqa: E402
from _jit_models import (CASES, best_row, check_same, lezero_case, start, timed,  # noqa: E402
                         torch_twin)


def ort_session(path, threads):
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.inter_op_num_threads = threads, 1
    return ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])


def contenders(name, folder, threads):
    import torch
    import lezero as lz
    from lezero import jit, onnx
    model, xs = lezero_case(name)
    path = os.path.join(folder, f"{name}.onnx")
    report = onnx.export(model, tuple(xs), path)
    sess = ort_session(path, threads)
    feed = dict(zip(report.input_names, xs))
    fused = jit.trace(model, *xs)
    twin = torch_twin(name, model.state_dict())
    txs = [torch.from_numpy(x) for x in xs]
    with torch.no_grad():
        traced = torch.jit.trace(twin, tuple(txs))
        check_same(sess.run(None, feed)[0], twin(*txs).numpy(), f"{name} onnxruntime")

    return {"LeZero eager": timed(lz.no_grad, model, *xs),
            "LeZero replay": timed(lz.no_grad, fused, *xs),
            "onnxruntime": lambda: sess.run(None, feed),
            "torch eager": timed(torch.no_grad, twin, *txs),
            "torch.jit.trace": timed(torch.no_grad, traced, *txs)}, report


def coverage_line():
    import warnings
    from lezero.onnx.coverage_table import coverage_rows
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rows = coverage_rows(verify=True)
    yes = sum(r["status"] == "yes" for r in rows)
    ident = sum(r["status"] == "identity" for r in rows)
    return (f"export coverage: {yes} of {len(rows)} registered operators export and match "
            f"onnxruntime, {ident} more add no node in eval mode (dropout); "
            f"not exported: {', '.join(r['name'] for r in rows if r['status'] == 'no')}")


def main():
    header = ["LeZero eager", "LeZero replay", "onnxruntime", "torch eager", "torch.jit.trace"]
    ratios = [("onnxruntime", "LeZero eager"), ("onnxruntime", "torch eager")]
    threads, rounds = start(header, ["ort/eager", "ort/torch"])
    with tempfile.TemporaryDirectory() as folder:
        for name in CASES:
            fns, report = contenders(name, folder, threads)
            best_row(name, fns, rounds, header, ratios)
            print(f"{'':<12}export: {report.n_nodes} ONNX nodes, max |ort - LeZero| "
                  f"{max(report.max_abs_diff.values()):.2g}")
    print("\n" + coverage_line())


if __name__ == "__main__":
    run_main(main)
