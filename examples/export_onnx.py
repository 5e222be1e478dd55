"""Train a zoo model on the digits, export it to ONNX and to a LeZero static graph, and
check both against the trained model.

    python examples/export_onnx.py                     # LeNet-5, a few seconds
    python examples/export_onnx.py --model mlp --opset 18 --epochs 10

The ONNX file (dynamic batch axis) runs in onnxruntime on the whole test set; its
predictions and accuracy are compared with LeZero's, as are those of the ``.lzg`` static
graph loaded back with ``jit.load``.  Writes model.onnx, model.lzg and summary.json to
--out.  Needs ``pip install lezero[onnx]``.
"""
import os
import time

import numpy as np

from _classify import classifier_parser, load_data, run_classifier
from _common import write_summary
from lezero.nn.models import MLP, LeNet5


def build(args, classes):
    if args.model == "mlp":
        return MLP(args.channels * args.image_size ** 2, [128, 64, classes], flatten=True)
    return LeNet5(num_classes=classes, in_channels=args.channels, input_size=args.image_size)


def predictions(run, x, batch=256):
    """Predicted classes over ``x`` in batches of exactly ``batch`` (the last one padded:
    a static graph takes the shape it was traced with)."""
    out = []
    for i in range(0, len(x), batch):
        chunk = x[i:i + batch]
        padded = np.concatenate([chunk, np.zeros((batch - len(chunk),) + x.shape[1:],
                                                 x.dtype)])
        out.append(np.asarray(run(padded))[:len(chunk)].argmax(axis=1))
    return np.concatenate(out)


def main():
    p = classifier_parser("export_onnx", __doc__, epochs=6, batch_size=64, lr=1e-2,
                          image_size=8, channels=1)
    p.prog = "python examples/export_onnx.py"
    p.set_defaults(optimizer="adamw", weight_decay=0.0)      # as examples/train_lenet.py
    p.add_argument("--model", choices=("lenet5", "mlp"), default="lenet5")
    p.add_argument("--opset", type=int, default=17, help="ONNX opset version (14 to 21)")
    t0 = time.perf_counter()
    model, _ = run_classifier(p, build)
    args = p.parse_args()
    import onnxruntime
    import lezero as lz
    from lezero import jit, onnx
    model.eval()
    _, (x, t) = load_data(args)
    onnx_path = os.path.join(args.out, "model.onnx")
    report = onnx.export(model, x[:2], onnx_path, opset_version=args.opset,
                         input_names=["images"], output_names=["logits"],
                         dynamic_axes={"images": {0: "batch"}, "logits": {0: "batch"}})
    print(report)
    session = onnxruntime.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
    with lz.no_grad():
        ours = predictions(lambda b: model(b).data, x)
        graph = jit.load(jit.trace(model, x[:256]).save(os.path.join(args.out, "model.lzg")))
        static = predictions(lambda b: graph(b).data, x)
    theirs = predictions(lambda b: session.run(None, {"images": b})[0], x)
    acc = {k: float((v == t).mean()) for k, v in
           (("lezero", ours), ("onnxruntime", theirs), ("static_graph", static))}
    agree = float((ours == theirs).mean())
    print(f"test accuracy: LeZero {acc['lezero']:.2%}, onnxruntime {acc['onnxruntime']:.2%}, "
          f"static graph {acc['static_graph']:.2%}; onnxruntime agrees on {agree:.2%} "
          f"of {len(x)} predictions")
    write_summary(args, args.model, "ONNX export", args.data, "onnx_test_acc",
                  acc["onnxruntime"], time.perf_counter() - t0, agreement=agree,
                  max_abs_diff=max(report.max_abs_diff.values()), opset=args.opset)


if __name__ == "__main__":
    main()
