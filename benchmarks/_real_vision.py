"""bench_real's image rows: torchvision's models beside LeZero's zoo models holding the
same (random) weights.  Each builder takes a shape ``{"batch": n, "size": pixels}`` and
returns ``(lezero_fn, reference_fn)``, two callables that run one step each.

Inference runs as a user writes it: ``model.eval()`` and ``lz.no_grad()`` /
``torch.no_grad()``.  Training: cross entropy, ``zero_grad``, backward, one SGD step
(momentum 0.9) on each side.
"""
import copy
import os
import tempfile

import numpy as np

import lezero as lz
from lezero.nn import models
from lezero.testing.oracles import import_torchvision


def tv_models():
    return import_torchvision().models


def images(shape, seed=0):
    """(batch, 3, size, size) float32 images."""
    n, s = shape["batch"], shape["size"]
    return np.random.default_rng(seed).standard_normal((n, 3, s, s)).astype(np.float32)


def labels(shape, classes=1000, seed=0):
    return np.random.default_rng(seed).integers(0, classes, shape["batch"])


def load_into(ours, ref):
    """Copy the torch module ``ref``'s state_dict into the LeZero model ``ours``."""
    ours.load_state_dict({k: v.detach().numpy().copy() for k, v in ref.state_dict().items()},
                         strict=True)
    return ours


def pair(name, **kwargs):
    """(LeZero model, torchvision model) of zoo name ``name``, the same weights."""
    import torch
    torch.manual_seed(0)
    ref = getattr(tv_models(), name)(**kwargs)
    return load_into(models.get_model(name, **kwargs), ref), ref


def inference_fns(ours, ref, x):
    """One forward in eval mode without gradients, on each side."""
    import torch
    ours.eval()
    ref.eval()
    tx = torch.from_numpy(x)

    def lezero_fn():
        with lz.no_grad():
            return ours(x)

    def torch_fn():
        with torch.no_grad():
            return ref(tx)
    return lezero_fn, torch_fn


def inference(name, **kwargs):
    """A builder timing the inference of zoo model ``name``."""
    def build(shape):
        extra = {"image_size": shape["size"]} if name.startswith("vit") else {}
        ours, ref = pair(name, **kwargs, **extra)
        return inference_fns(ours, ref, images(shape))
    return build


def fused_vs_unfused(name):
    """A builder timing zoo model ``name``'s inference with conv-bn fusion against the
    same model run unfused (``inference_fusion.disabled()``)."""
    from lezero.nn import inference_fusion

    def build(shape):
        model = models.get_model(name).eval()
        x = images(shape)

        def fused():
            with lz.no_grad():
                return model(x)

        def unfused():
            with lz.no_grad(), inference_fusion.disabled():
                return model(x)
        return fused, unfused
    return build


def resnet18_train(shape):
    """One SGD step of ResNet-18 (train mode, batch statistics)."""
    import torch
    ours, ref = pair("resnet18")
    x, t = images(shape), labels(shape)
    tx, tt = torch.from_numpy(x), torch.from_numpy(t)
    opt = lz.optim.SGD(ours.parameters(), lr=0.01, momentum=0.9)
    topt = torch.optim.SGD(ref.parameters(), lr=0.01, momentum=0.9)
    ours.train()
    ref.train()

    def lezero_fn():
        loss = lz.functions.cross_entropy(ours(x), t)
        opt.zero_grad()
        loss.backward()
        opt.step()

    def torch_fn():
        loss = torch.nn.functional.cross_entropy(ref(tx), tt)
        topt.zero_grad()
        loss.backward()
        topt.step()
    return lezero_fn, torch_fn


# ----- INT8 ---------------------------------------------------------------------------

def lezero_int8(model, calib):
    """LeZero's post-training quantization of a ResNet (fuse, observe ``calib``,
    convert), on a copy."""
    from lezero import quantization as Q
    from lezero.quantization.models import quantizable_resnet
    prepared = Q.prepare(Q.fuse(quantizable_resnet(copy.deepcopy(model)).eval()))
    Q.calibrate(prepared, [calib])
    return Q.convert(prepared)


def torch_int8(ref, calib):
    """PyTorch's eager post-training quantization (x86 engine and qconfig) of
    torchvision's quantizable ResNet-18 holding ``ref``'s weights."""
    import warnings

    import torch
    import torch.ao.quantization as tq
    tvq = import_torchvision().models.quantization
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")         # torch.ao.quantization's deprecation notes
        q = tvq.resnet18(weights=None, quantize=False)
        q.load_state_dict(ref.state_dict())
        q.eval()
        q.fuse_model()
        torch.backends.quantized.engine = "x86"
        q.qconfig = tq.get_default_qconfig("x86")
        tq.prepare(q, inplace=True)
        with torch.no_grad():
            q(torch.from_numpy(calib))
        tq.convert(q, inplace=True)
    return q


def int8_vs_float(shape):
    """LeZero's INT8 ResNet-18 against LeZero's float32 one (the reference here)."""
    ours, _ = pair("resnet18")
    x = images(shape)
    q = lezero_int8(ours.eval(), images(shape, seed=1))
    int8_fn, _ = inference_fns(q, _NoTorch(), x)
    float_fn, _ = inference_fns(ours, _NoTorch(), x)
    return int8_fn, float_fn


def int8_vs_torch(shape):
    """LeZero's INT8 ResNet-18 against PyTorch's INT8 one, same float weights."""
    ours, ref = pair("resnet18")
    calib = images(shape, seed=1)
    return inference_fns(lezero_int8(ours.eval(), calib), torch_int8(ref, calib), images(shape))


class _NoTorch:
    """A stand-in reference for rows that compare LeZero with itself."""

    def eval(self):
        return self


# ----- onnxruntime --------------------------------------------------------------------

def ort_session(data, threads):
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    return ort.InferenceSession(data, opts, providers=["CPUExecutionProvider"])


def float_vs_onnxruntime(shape, threads=2):
    """LeZero's float ResNet-18 against onnxruntime running LeZero's own export of it."""
    from lezero import onnx as lzonnx
    ours, _ = pair("resnet18")
    ours.eval()
    x = images(shape)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "resnet18.onnx")
        lzonnx.export(ours, (x,), path)
        with open(path, "rb") as f:
            session = ort_session(f.read(), threads)
    name = session.get_inputs()[0].name
    lezero_fn, _ = inference_fns(ours, _NoTorch(), x)
    return lezero_fn, lambda: session.run(None, {name: x})
