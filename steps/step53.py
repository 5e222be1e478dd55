"""Step 53: export to ONNX and import ONNX.

ONNX is the exchange format other runtimes read.  ``onnx.export`` traces the model and
writes each node with the ONNX rule of its Function class; the file passes the ONNX
checker and runs in onnxruntime, whose outputs are compared with LeZero's.  A dynamic
batch axis lets the file take any batch size.  ``onnx.load`` goes the other way: the
ONNX graph becomes a LeZero Module whose initializers are Parameters, so it can be
fine-tuned.  (Needs the onnx extra: ``pip install -e ".[onnx]"`` or ``make install``.)
Run: python steps/step53.py
"""
import os
import tempfile

import numpy as np

try:                                     # the onnx extra, checked before any work
    import onnx as _onnx_package  # noqa: F401
    import onnxruntime  # noqa: F401
except ImportError as e:
    raise SystemExit(f"step53.py needs {e.name}: pip install -e \".[onnx]\" in the "
                     "checkout (or make install)") from None

import lezero as lz
import lezero.functions as F
from lezero import onnx, optim
from lezero.nn import models


def main():
    lz.manual_seed(0)
    net = models.LeNet5(num_classes=10, input_size=28).eval()
    x = np.random.default_rng(0).standard_normal((2, 1, 28, 28)).astype(np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "lenet.onnx")
        report = onnx.export(net, x, path, input_names=["images"], output_names=["logits"],
                             dynamic_axes={"images": {0: "batch"}, "logits": {0: "batch"}})
        print(report)
        print("ONNX operators:", ", ".join(report.ops))

        import onnxruntime
        session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
        five = np.random.default_rng(1).standard_normal((5, 1, 28, 28)).astype(np.float32)
        (logits,) = session.run(None, {"images": five})
        with lz.no_grad():
            print(f"batch of 5 in onnxruntime vs LeZero: max difference "
                  f"{np.abs(logits - net(five).data).max():.1e}")

        imported = onnx.load(path)
    print(f"imported: {len(list(imported.parameters()))} parameters, "
          f"e.g. {list(imported.onnx_names.values())[:2]}")
    labels = np.array([3, 7])
    opt = optim.SGD(imported.parameters(), lr=0.1)
    losses = []
    for _ in range(5):                  # fine-tune the imported model on two labels
        opt.zero_grad()
        losses.append(F.cross_entropy(imported(x), labels))
        losses[-1].backward()
        opt.step()
    print("fine-tuning the imported model, loss per step:",
          " ".join(f"{float(v.data):.3f}" for v in losses))


if __name__ == "__main__":
    main()
