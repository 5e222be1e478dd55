"""ONNX: the exported models in onnxruntime beside LeZero and PyTorch, and the export
coverage of the operator registry.

    python benchmarks/bench_onnx.py          # BENCH_THREADS=n, BENCH_ROUNDS=n

Each case (MLP at batch 1 and 64, LeNet-5 at batch 8, GPT-mini forward on 4 x 64 tokens)
is exported with ``lezero.onnx.export`` (validated against LeZero), then LeZero eager,
the LeZero static graph with fusion, onnxruntime (CPU, the same thread count), PyTorch
eager and ``torch.jit.trace`` run in alternating rounds; printed are best times and the
ratios of onnxruntime to LeZero eager and to PyTorch eager.  Last, the share of
registered operators whose probe exports and matches onnxruntime.
"""
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import _fmt, interleaved_times, limit_threads, set_threads  # noqa: E402
from _jit_models import CASES, check_same, lezero_case, torch_twin  # noqa: E402


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

    def under(ctx, fn, *args):
        def run():
            with ctx():
                fn(*args)
        return run
    return {"LeZero eager": under(lz.no_grad, model, *xs),
            "LeZero replay": under(lz.no_grad, fused, *xs),
            "onnxruntime": lambda: sess.run(None, feed),
            "torch eager": under(torch.no_grad, twin, *txs),
            "torch.jit.trace": under(torch.no_grad, traced, *txs)}, report


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
    threads = set_threads()
    limit_threads(threads)
    rounds = int(os.environ.get("BENCH_ROUNDS", 30))
    print(f"threads: {threads}; best of {rounds} alternating rounds; inference")
    header = ["LeZero eager", "LeZero replay", "onnxruntime", "torch eager", "torch.jit.trace"]
    print(f"\n{'case':<10}" + "".join(f"{h:>17}" for h in header)
          + f"{'ort/eager':>11}{'ort/torch':>11}")
    with tempfile.TemporaryDirectory() as folder:
        for name in CASES:
            fns, report = contenders(name, folder, threads)
            best = dict(zip(fns, (min(t) for t in interleaved_times(list(fns.values()),
                                                                    rounds=rounds))))
            cells = "".join(f"{_fmt(best[h]):>17}" for h in header)
            print(f"{name:<10}{cells}{best['onnxruntime'] / best['LeZero eager']:>11.2f}"
                  f"{best['onnxruntime'] / best['torch eager']:>11.2f}")
            print(f"{'':<10}export: {report.n_nodes} ONNX nodes, max |ort - LeZero| "
                  f"{max(report.max_abs_diff.values()):.2g}")
    print("\n" + coverage_line())


if __name__ == "__main__":
    main()
