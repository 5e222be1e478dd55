"""Train a zoo model on the digits, export it to ONNX and to a LeZero static graph, and
check both against the trained model.

    python examples/export_onnx.py                     # LeNet-5, a few seconds
    python examples/export_onnx.py --model mlp --opset 18 --epochs 10

The ONNX file (dynamic batch axis) runs in onnxruntime on the whole test set; its
predictions and accuracy are compared with LeZero's, as are those of the ``.lzg`` static
graph loaded back with ``jit.load``.  The graph is traced for serving: in eval mode, at
``--graph-batch`` rows, which ``python -m lezero.serving`` serves for any batch size
(it runs chunks of that many rows and pads the last one):

    python -m lezero.serving --model digits=runs/export_onnx/model.lzg

Writes model.onnx, model.lzg and summary.json to --out.  Needs the onnx extra
(``pip install -e ".[onnx]"``, or ``make install``).
"""
import argparse
import os
import time

import numpy as np

from _classify import classifier_parser, load_data, run_classifier
from _common import require, write_summary
from lezero.nn.models import MLP, LeNet5


def build(args, classes):
    if args.model == "mlp":
        return MLP(args.channels * args.image_size ** 2, [128, 64, classes], flatten=True)
    return LeNet5(num_classes=classes, in_channels=args.channels, input_size=args.image_size)


def predictions(run, x, batch):
    """Predicted classes over ``x`` in batches of exactly ``batch`` (the last one padded:
    a static graph takes the shape it was traced with)."""
    out = []
    for i in range(0, len(x), batch):
        chunk = x[i:i + batch]
        padded = np.concatenate([chunk, np.zeros((batch - len(chunk),) + x.shape[1:],
                                                 x.dtype)])
        out.append(np.asarray(run(padded))[:len(chunk)].argmax(axis=1))
    return np.concatenate(out)


def _positive(text):
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return int(text)


def main():
    p = classifier_parser("export_onnx", __doc__, epochs=6, batch_size=64, lr=1e-2,
                          image_size=8, channels=1)
    p.prog = "python examples/export_onnx.py"
    p.set_defaults(optimizer="adamw", weight_decay=0.0)      # as examples/train_lenet.py
    p.add_argument("--model", choices=("lenet5", "mlp"), default="lenet5")
    p.add_argument("--opset", type=int, default=17, help="ONNX opset version (14 to 21)")
    p.add_argument("--graph-batch", type=_positive, default=32,
                   help="rows the .lzg graph is traced at (the server's batches)")
    require("onnx", "onnxruntime")           # before training, not after
    t0 = time.perf_counter()
    model, _ = run_classifier(p, build)
    args = p.parse_args()
    import onnxruntime
    import lezero as lz
    from lezero import jit, onnx
    model.eval()
    _, (x, t) = load_data(args)
    lzg_path = os.path.join(args.out, "model.lzg")
    with lz.test_mode():                     # eval mode, as a server calls it
        jit.trace(model, x[:args.graph_batch]).save(lzg_path)
    onnx_path = os.path.join(args.out, "model.onnx")
    report = onnx.export(model, x[:2], onnx_path, opset_version=args.opset,
                         input_names=["images"], output_names=["logits"],
                         dynamic_axes={"images": {0: "batch"}, "logits": {0: "batch"}})
    print(report)
    session = onnxruntime.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
    graph = jit.load(lzg_path)
    with lz.no_grad(), lz.test_mode():
        ours = predictions(lambda b: model(b).data, x, 256)
        static = predictions(lambda b: graph(b).data, x, args.graph_batch)
    theirs = predictions(lambda b: session.run(None, {"images": b})[0], x, 256)
    acc = {k: float((v == t).mean()) for k, v in
           (("lezero", ours), ("onnxruntime", theirs), ("static_graph", static))}
    agree = float((ours == theirs).mean())
    print(f"test accuracy: LeZero {acc['lezero']:.2%}, onnxruntime {acc['onnxruntime']:.2%}, "
          f"static graph {acc['static_graph']:.2%}; onnxruntime agrees on {agree:.2%} "
          f"of {len(x)} predictions; wrote {onnx_path} and {lzg_path}")
    write_summary(args, args.model, "ONNX export", args.data, "onnx_test_acc",
                  acc["onnxruntime"], time.perf_counter() - t0, agreement=agree,
                  max_abs_diff=max(report.max_abs_diff.values()), opset=args.opset)


if __name__ == "__main__":
    main()
