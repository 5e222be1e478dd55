"""Step 66: ONNX without silent answers -- a padded mask, a torch-exported ViT, ONNX's own cases.

Step 53 exported LeNet and loaded it back.  Real models bring three harder questions:

1. **Does the file follow its inputs?**  A trace freezes whatever was computed outside
   LeZero operators.  BERT's attention bias is ``(1 - mask) * min`` in LeZero operators,
   so exported with an all-ones mask the file keeps ``attention_mask`` as an input and,
   with a dynamic batch and sequence, gives LeZero's logits on a *padded* mask at another
   size in onnxruntime.  The exporter checks it: it traces again with other input values
   (integers ``(x + 1) % (max + 1)``, so an all-ones mask becomes zeros) and refuses a
   model whose constants changed (padding weights computed with NumPy on the ids).
   ``jit.trace`` runs the same check; attributes that only scale a gradient (an
   embedding's padding) are not compared, so TextCNN traces from padded ids.
2. **Does what PyTorch writes load?**  torchvision's ViT exported by ``torch.onnx.export``
   (``dynamo=False``, opset 17, dynamic batch) loads as a LeZero module that matches torch
   at two batch sizes and fine-tunes (only where torch and torchvision are installed).
3. **Is each operator right?**  ONNX ships a case per operator variant (inputs, attributes,
   expected outputs); ``lezero.onnx.backend`` is the ``onnx.backend.base.Backend`` that
   ``onnx.backend.test.BackendTest`` drives over all of them in ``make test``.  Here a few
   operators' cases: each passes or is refused with an error naming what is unsupported.
(Needs the onnx extra: ``pip install -e ".[onnx]"`` or ``make install``.)
Run: python steps/step66.py
"""
import importlib
import os
import tempfile
import warnings

import numpy as np

try:                                     # the onnx extra, checked before any work
    import onnx as onnx_package
    import onnxruntime
except ImportError as e:
    raise SystemExit(f"step66.py needs {e.name}: pip install -e \".[onnx]\" in the "
                     "checkout (or make install)") from None

import lezero as lz
import lezero.functions as F
from lezero import jit, nn, onnx, optim
from lezero.nn import models

rng = np.random.default_rng(0)


def ort_run(path, feeds):
    session = onnxruntime.InferenceSession(path, sess_options=onnx.session_options(),
                                           providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def bert_with_a_padded_mask(tmp):
    print("1. BERT exported with an all-ones mask, run on a padded one")
    lz.manual_seed(0)
    bert = models.BertForMaskedLM(vocab_size=99, hidden_size=32, num_hidden_layers=2,
                                  num_attention_heads=4, intermediate_size=37).eval()
    ids, ones = rng.integers(0, 99, (2, 5)), np.ones((2, 5), np.int64)
    axes = {0: "batch", 1: "sequence"}
    path = os.path.join(tmp, "bert.onnx")
    report = onnx.export(bert, (ids, ones), path, input_names=["input_ids", "attention_mask"],
                         output_names=["logits"],
                         dynamic_axes={"input_ids": axes, "attention_mask": axes,
                                       "logits": axes})
    print(f"  {report}")
    print("  graph inputs:", [i.name for i in onnx_package.load(path).graph.input])
    ids3 = rng.integers(0, 99, (3, 7))
    padded = np.array([[1] * 7, [1] * 4 + [0] * 3, [1] * 2 + [0] * 5])
    (logits,) = ort_run(path, {"input_ids": ids3, "attention_mask": padded})
    with lz.no_grad():
        ref = bert(ids3, padded).data
        unmasked = bert(ids3, np.ones_like(padded)).data
    print(f"  batch 3 x 7, padded mask: max |onnxruntime - LeZero| = "
          f"{np.abs(logits - ref).max():.1e}; the mask matters (it moves the logits by up to "
          f"{np.abs(unmasked - ref).max():.1e})")


class MeanOfTokens(nn.Module):
    """The mean embedding of the non-padding tokens (id 0 pads).  ``in_numpy``: the
    padding weights are computed with NumPy on the ids' array, else with LeZero
    operators (``min(ids, 1)``: 1 for a token, 0 for padding)."""

    def __init__(self, in_numpy):
        super().__init__()
        self.embed, self.in_numpy = nn.Embedding(12, 4, padding_idx=0), in_numpy

    def forward(self, ids):
        ids = ids if isinstance(ids, lz.Variable) else lz.Variable(ids, requires_grad=False)
        if self.in_numpy:
            real = lz.Variable((ids.data != 0).astype(np.float32), requires_grad=False)
        else:
            real = F.minimum(ids.to(dtype=np.float32), 1.0)
        summed = F.sum(self.embed(ids.data) * F.expand_dims(real, -1), axis=1)
        return summed / F.sum(real, axis=1, keepdims=True)


def refused_when_computed_in_numpy(tmp):
    print("\n  A value computed from an input with NumPy is refused, not frozen:")
    ids = np.array([[5, 7, 9, 0, 0], [3, 4, 2, 8, 1]])
    other = np.array([[2, 0, 0, 0, 0], [9, 9, 4, 1, 0]])
    for in_numpy in (True, False):
        lz.manual_seed(0)
        model, path = MeanOfTokens(in_numpy), os.path.join(tmp, "mean.onnx")
        label = "NumPy weights:    " if in_numpy else "LeZero operators: "
        try:
            onnx.export(model, ids, path, input_names=["ids"])
        except onnx.ExportError as e:
            print(f"  {label}onnx.export: {str(e)[13:120]}...")
            continue
        (out,) = ort_run(path, {"ids": other})
        with lz.no_grad():
            print(f"  {label}exported; other padding in onnxruntime vs LeZero "
                  f"{np.abs(out - model(other).data).max():.1e}")
    try:
        jit.trace(MeanOfTokens(True), np.ones((2, 5), np.int64))      # no padding at all
    except jit.TraceError as e:
        print(f"  jit.trace from all-ones ids (rolling them changes nothing): "
              f"{str(e)[11:90]}...")
    textcnn = models.get_model("textcnn", vocab_size=30, num_classes=4, embed_dim=8,
                               kernel_sizes=(2, 3), num_filters=4).eval()
    graph = jit.trace(textcnn, ids)
    with lz.no_grad():
        diff = np.abs(graph(other).data - textcnn(other).data).max()
    print(f"  TextCNN traced from padded ids (padding only scales its embedding's gradient): "
          f"replay vs eager on other padding {diff:.1e}")


def torch_vit(tmp):
    print("\n2. torchvision's ViT, exported by torch.onnx.export (dynamo=False, opset 17)")
    try:
        import torch
        from lezero.testing.oracles import import_torchvision
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tv = import_torchvision()
    except ImportError as e:
        print(f"  skipped: {e.name} is not installed (pip install torch torchvision)")
        return
    torch.manual_seed(0)
    vit = tv.models.VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2,
                                      hidden_dim=16, mlp_dim=32, num_classes=5).eval()
    with torch.no_grad():
        vit.heads.head.weight.normal_(0, 0.1)          # torchvision zero-initialises it
    path = os.path.join(tmp, "vit.onnx")
    images = {b: torch.randn(b, 3, 32, 32) for b in (2, 3)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(vit, (images[2],), path, dynamo=False, opset_version=17,
                          input_names=["images"], output_names=["logits"],
                          dynamic_axes={"images": {0: "batch"}, "logits": {0: "batch"}})
    net = onnx.load(path)
    ops = sorted({n.op_type for n in onnx_package.load(path).graph.node})
    print(f"  {len(ops)} ONNX operator types, e.g. {', '.join(ops[:8])} ...")
    for b, x in images.items():
        with torch.no_grad(), lz.no_grad():
            diff = np.abs(net(x.numpy()).data - vit(x).numpy()).max()
        print(f"  batch {b}: max |LeZero - torch| = {diff:.1e}")
    x, labels = images[2].numpy(), np.array([1, 3])
    opt = optim.SGD(net.parameters(), lr=0.05)
    losses = []
    for _ in range(4):                        # fine-tune the import on two labels
        opt.zero_grad()
        losses.append(F.cross_entropy(net(x), labels))
        losses[-1].backward()
        opt.step()
    print("  fine-tuning the import, loss per step:",
          " ".join(f"{float(v.data):.3f}" for v in losses))


def node_cases(modules):
    """{operator: ONNX's node cases for it} for {operator: its module}.  Each module of
    onnx.backend.test.case.node builds its cases when imported, so importing only these
    is quick (``load_model_tests(kind="node")`` builds all ~1900)."""
    import onnx.backend.test.case.node as node
    cases = {}
    for op, module in modules.items():
        before = len(node._NodeTestCases)
        importlib.import_module(f"onnx.backend.test.case.node.{module}")
        cases[op] = node._NodeTestCases[before:]
    return cases


def as_array(value):
    """A case's input or expected output (an array, or a TensorProto for types NumPy
    lacks) as an array."""
    from onnx import numpy_helper
    return numpy_helper.to_array(value) if hasattr(value, "raw_data") else np.asarray(value)


def outcome(backend, case):
    """'pass', 'wrong' (an answer unlike ONNX's: dtype, shape or value) or the error."""
    (inputs, expected), = case.data_sets
    try:
        got = backend.prepare(case.model).run([as_array(v) for v in inputs])
    except (onnx.OnnxImportError, TypeError, NotImplementedError) as e:
        return f"{type(e).__name__}: {e}"
    for out, ref in zip(got, map(as_array, expected)):
        out = np.asarray(out)
        if out.dtype != ref.dtype or out.shape != ref.shape or not np.allclose(
                out, ref, rtol=case.rtol, atol=case.atol, equal_nan=True):
            return "wrong"
    return "pass"


def onnx_node_cases():
    print("\n3. ONNX's own node cases through lezero.onnx.backend (rtol 1e-3, atol 1e-7, "
          "dtype and shape exact)")
    import lezero.onnx.backend as backend
    modules = {"Div": "div", "Mod": "mod", "ArgMax": "argmax",
               "LayerNormalization": "layernormalization", "CastLike": "castlike"}
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        results = {op: [outcome(backend, c) for c in cases]
                   for op, cases in node_cases(modules).items()}
    print(f"  {'operator':<20} {'cases':>5} {'pass':>5} {'refused':>8} {'wrong':>6}")
    for op, rows in results.items():
        refused = [r for r in rows if r not in ("pass", "wrong")]
        print(f"  {op:<20} {len(rows):5d} {rows.count('pass'):5d} {len(refused):8d} "
              f"{rows.count('wrong'):6d}")
    print("  (a case with '_expanded' in its name is the operator's function body in "
          "simpler operators)")
    first = next(r for rows in results.values() for r in rows if r not in ("pass", "wrong"))
    print(f"  a refusal names what is unsupported: {first[:230]}")
    print("  (CastLike's refusals are types NumPy has no arrays for: bfloat16, float8, int4 ...;"
          "\n  lezero/onnx/backend_exclusions.txt gives each excluded case of the suite its "
          "reason)")
    node = onnx_package.helper.make_node("Mod", ["a", "b"], ["y"], fmod=0)
    (y,) = backend.run_node(node, [np.array([-7, 7, -7]), np.array([3, -3, -3])])
    print(f"  backend.run_node(Mod): [-7, 7, -7] mod [3, -3, -3] = {y.tolist()} "
          "(the divisor's sign, as Python's %)")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        bert_with_a_padded_mask(tmp)
        refused_when_computed_in_numpy(tmp)
        torch_vit(tmp)
    onnx_node_cases()


if __name__ == "__main__":
    main()
