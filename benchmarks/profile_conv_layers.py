"""Where a vision model's inference spends its convolution time, layer shape by layer
shape, LeZero beside PyTorch, inside the running models (not layers timed alone: a
layer in a model meets the caches and threads its neighbours leave).

    python benchmarks/profile_conv_layers.py mobilenet_v2 2 160      # model batch size
    python benchmarks/profile_conv_layers.py resnet18 2 160 --rounds 30 --rows 25

Both models hold the same weights (bench_real's ``_real_vision.pair``) and run in eval
mode without gradients, LeZero's fused (conv + batch norm + activation as one
convolution).  Each convolution is timed where it runs: LeZero's product
(``functions.conv.functions.forward_product``, the product alone: the fused bias and
clamp pass and the layer's fixed cost are outside it) and PyTorch's
``torch.nn.functional.conv2d``; the clock calls add a few microseconds to each.  The
models run ``--rounds`` times each, LeZero's rounds first; printed: the whole forward
pass per model, the convolutions' sum, and the layer shapes where LeZero is furthest
behind (the time of every layer of a shape, per forward pass).
"""
import argparse
import collections
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import set_threads  # noqa: E402


def _timed(table, key_of, fn):
    """``fn`` wrapped to add its seconds to ``table[key_of(args)]``."""
    def wrapper(*args, **kwargs):
        t0 = time.perf_counter()
        out = fn(*args, **kwargs)
        table[key_of(*args, **kwargs)] += time.perf_counter() - t0
        return out
    return wrapper


def _lz_key(geom, algo, x, w, cache):
    return (tuple(x.shape), tuple(w.shape), geom.stride[0], geom.groups)


def _torch_key(x, w, bias=None, stride=1, padding=0, dilation=1, groups=1):
    s = stride if isinstance(stride, int) else stride[0]
    return (tuple(x.shape), tuple(w.shape), s, groups)


def profile(name, batch, size, rounds):
    """(model seconds {side}, per-shape seconds {side: {key: s}}), per forward pass."""
    import _real_vision as rv
    import torch.nn.functional as TF
    from lezero.nn import inference_fusion

    ours, ref = rv.pair(name)
    lz_fn, torch_fn = rv.inference_fns(ours, ref, rv.images({"batch": batch, "size": size}))
    layers = {"lezero": collections.defaultdict(float), "torch": collections.defaultdict(float)}
    real_lz, real_torch = inference_fusion.forward_product, TF.conv2d
    inference_fusion.forward_product = _timed(layers["lezero"], _lz_key, real_lz)
    TF.conv2d = _timed(layers["torch"], _torch_key, real_torch)
    try:
        for fn in (lz_fn, torch_fn, lz_fn, torch_fn):         # warm-up
            fn()
        for table in layers.values():
            table.clear()
        model = {}
        for side, fn in (("lezero", lz_fn), ("torch", torch_fn)):
            t0 = time.perf_counter()
            for _ in range(rounds):
                fn()
            model[side] = (time.perf_counter() - t0) / rounds
    finally:
        inference_fusion.forward_product, TF.conv2d = real_lz, real_torch
    per_pass = {side: {k: v / rounds for k, v in t.items()} for side, t in layers.items()}
    return model, per_pass


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("model", help="a torchvision / LeZero zoo name: resnet18, mobilenet_v2")
    p.add_argument("batch", type=int)
    p.add_argument("size", type=int, help="image height and width")
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--rows", type=int, default=20, help="layer shapes printed")
    a = p.parse_args(argv)
    set_threads()
    model, layers = profile(a.model, a.batch, a.size, a.rounds)
    ours, theirs = layers["lezero"], layers["torch"]
    print(f"{a.model} b{a.batch} {a.size}x{a.size}, per forward pass: model LeZero "
          f"{model['lezero'] * 1e3:.2f} ms, PyTorch {model['torch'] * 1e3:.2f} ms; "
          f"convolutions {sum(ours.values()) * 1e3:.2f} ms, {sum(theirs.values()) * 1e3:.2f} ms")
    gaps = sorted(ours, key=lambda k: theirs.get(k, 0.0) - ours[k])
    print(f"{'x shape, w shape, stride, groups':<58}{'LeZero':>9}{'PyTorch':>9}{'gap':>8}")
    for k in gaps[:a.rows]:
        t = theirs.get(k, float("nan"))
        print(f"{str(k):<58}{ours[k] * 1e3:>6.3f} ms{t * 1e3:>6.3f} ms"
              f"{(ours[k] - t) * 1e3:>8.3f}")


if __name__ == "__main__":
    main()
