"""Step 67: speed where users run it -- fusion, the convolution's algorithm, INT8, threads.

Step 62 timed an MLP's training step.  Real models are convolution networks run for
inference, on whatever machine and environment the user has; what decides their
speed is measured here on small models (a ResNet-10 of width 16 on 32x32
images, a MobileNetV2 inverted-residual block):

1. **Timing honestly.**  Warm up first (Numba compiles, buffers are allocated), then run
   *rounds*: a short block of calls of each contender, the order alternating, and take
   the median of the per-round ratios (``benchmarks/_common.round_ratios``, imported here).
2. **Inference fusion.**  Under ``eval()`` *and* ``lz.no_grad()`` nothing can see a batch
   norm's output, so ``lezero.nn.inference_fusion`` folds its statistics into the
   convolution before it (``w' = w * gamma / std``) and applies the ReLU in place: one
   operator instead of three.  In ``train()`` or with gradients recorded, the modules run
   one by one, so training is untouched.
3. **The convolution's algorithm.**  im2col + GEMM, Winograd, FFT, direct (a 1x1 kernel is
   one GEMM on the input itself) or the depthwise kernel: ``F.conv_explain`` shows the
   cost model's prediction beside a measurement, and which one ``algo="auto"`` runs.
4. **INT8.**  Post-training quantization (fuse, observe, convert) turns the ResNet into
   uint8 activations and int8 weights; on a CPU with VNNI (``vpdpbusd``) or AVX2 the
   products run in ``lezero.kernels.int8_gemm`` with activations kept channels-last
   between layers.  We check agreement with float and time both, as the kernels run and
   with all of them on the calling thread: on busy cores, waking a thread pool for a
   small product can cost more than the product.
5. **Beside PyTorch.**  torchvision's inverted-residual block with the same weights and
   thread count (skipped, with a note, where torch and torchvision are not installed).
6. **Threads and BLAS.**  LeZero applies its thread policy itself on import (a user sets
   no variable); ``lezero.runtime.rows()`` says what it applied.  The full comparison at
   real sizes is ``benchmarks/bench_real.py`` (minutes, so only its command is printed).
Every ratio printed is what this run measured on this machine; on a busy machine it moves.
Run: python steps/step67.py
"""
import copy
import importlib.util
import os
import sys
import time
import warnings

import numpy as np

import lezero as lz
import lezero.functions as F
import lezero.runtime
from lezero import quantization as Q
from lezero.kernels import int8_gemm
from lezero.nn import inference_fusion
from lezero.nn.models import BasicBlock, InvertedResidual, ResNet
from lezero.quantization.models import quantizable_resnet

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                     "benchmarks")
sys.path.insert(0, BENCH)
from _common import interleaved_times, round_ratios  # noqa: E402  (not copied)

rng = np.random.default_rng(0)
ROUNDS = 7


def settled(model, batches=4):
    """``model`` after a few training-mode forwards on random images, so its batch norms
    hold running statistics that are not the initial 0 and 1 (as a trained model's)."""
    model.train()
    with lz.no_grad():
        for _ in range(batches):
            model(rng.standard_normal((8, model_channels(model), 32, 32)).astype(np.float32))
    return model.eval()


def model_channels(model):
    """The input channels of ``model``'s first convolution."""
    return next(m for m in model.modules() if isinstance(m, lz.nn.Conv2d)).in_channels


def inference(model, x, fused=True):
    """A call running ``model(x)`` without a graph, fused or not."""
    def run():
        with lz.no_grad():
            if fused:
                return model(x)
            with inference_fusion.disabled():
                return model(x)
    return run


def operator_calls(fn):
    """{operator: calls} of one ``fn()``, read with ``lz.TimerHook``."""
    with lz.TimerHook() as timer:
        fn()
    return {name: rec["calls"] for name, rec in timer.summary().items()}


def timing_honestly(model, x):
    print("1. timing: warm-up, then alternating rounds, median of the per-round ratios")
    run = inference(model, x)
    start = time.perf_counter()
    run()                              # the first call folds weights, may compile
    first = time.perf_counter() - start
    same = inference(model, x)                   # an A/A test: two identical contenders
    times = np.array(interleaved_times([run, same], rounds=ROUNDS))
    ratios = times[0] / times[1]
    print(f"  first call {first * 1e3:.1f} ms; warm median {np.median(times) * 1e3:.2f} ms")
    print(f"  A/A: the model against itself, {ROUNDS} rounds: median ratio "
          f"{np.median(ratios):.2f}, rounds from {ratios.min():.2f} to {ratios.max():.2f}")
    print("  Each round runs a block of 3 calls of each side (the fastest counts), the order "
          "flipping\n  every round, so a slow spell slows both sides of that round and cancels "
          "in its ratio.\n  The A/A spread is this machine's noise: a ratio inside it says "
          "nothing.")


def compare_modes(name, model, x):
    """Print train() vs eval() without fusion vs eval()+no_grad (fused) for ``model``."""
    with lz.no_grad():
        fused = model(x).data
        with inference_fusion.disabled():
            unfused = model(x).data
    recorded = model(x).data                      # eval(), gradients on: runs unfused
    with lz.no_grad():                            # train(), on a copy (it updates statistics)
        batch_stats = copy.deepcopy(model).train()(x).data
    scale = np.abs(unfused).max()
    print(f"  {name}:\n    max |fused - unfused| / max |out| = "
          f"{np.abs(fused - unfused).max() / scale:.1e}; eval() with a graph recorded runs "
          f"unfused and matches: {np.allclose(recorded, unfused, rtol=1e-5, atol=1e-6)}\n"
          f"    train() uses the batch's statistics: it differs by "
          f"{np.abs(batch_stats - unfused).max() / scale:.2f} of max |out|")
    plain = operator_calls(inference(model, x, fused=False))
    folded = operator_calls(inference(model, x))
    keys = sorted(set(plain) | set(folded), key=lambda k: -plain.get(k, 0))
    print("    operator calls unfused -> fused: " + ", ".join(
        f"{k} {plain.get(k, 0)}->{folded.get(k, 0)}" for k in keys))
    ratios, _ = round_ratios([inference(model, x), inference(model, x, fused=False)],
                             rounds=ROUNDS)
    print(f"    measured fused / unfused time: {ratios[0]:.2f}")


def fusion(resnet, x):
    print("\n2. inference fusion: conv + batch norm (+ ReLU) folded under eval() + no_grad")
    compare_modes("ResNet-10 w16, batch 8", resnet, x)
    block = settled(InvertedResidual(24, 24, stride=1, expand_ratio=6))
    compare_modes("inverted residual 24->144->24, batch 8",
                  block, rng.standard_normal((8, 24, 32, 32)).astype(np.float32))
    print("  Unfused, an eval() batch norm is a Mul and an Add of per-channel vectors (hence the "
          "Reshapes);\n  fused, they are gone: folded into the convolution before them, whose "
          "ReLU / ReLU6 (HardTanh)\n  then runs in place.  What stays: the convolutions, the "
          "residual Add + ReLU, the classifier.")


# (label, input shape, weight shape, keywords): the layer kinds of ResNet and MobileNet
SHAPES = [("1x1 64->128 @28", (2, 64, 28, 28), (128, 64, 1, 1), {}),
          ("3x3 s1 64 @28", (2, 64, 28, 28), (64, 64, 3, 3), dict(padding=1)),
          ("3x3 s2 64->128 @28", (2, 64, 28, 28), (128, 64, 3, 3), dict(padding=1, stride=2)),
          ("7x7 s2 stem 3->32 @64", (2, 3, 64, 64), (32, 3, 7, 7), dict(padding=3, stride=2)),
          ("3x3 depthwise 96 @28", (2, 96, 28, 28), (96, 1, 3, 3), dict(padding=1, groups=96))]


def convolution_choice():
    print("\n3. which algorithm algo='auto' runs (F.conv_explain: predicted and measured ms, "
          "forward)")
    print(f"  {'layer':<24}{'chosen':<14}{'predicted':>10}{'measured':>10}   "
          "fastest measured")
    for label, xs, ws, kw in SHAPES:
        ex = F.conv_explain(xs, ws, repeat=2, show=False, **kw)
        ran = {r["algo"]: r for r in ex.rows if not r["unsupported"]}
        best = min(ran.values(), key=lambda r: r["measured_ms"])
        pick = ran[ex.chosen]
        print(f"  {label:<24}{ex.chosen:<14}{pick['predicted_ms']:>10.2f}"
              f"{pick['measured_ms']:>10.2f}   {best['algo']} ({best['measured_ms']:.2f})")
    print("  'direct' on a 1x1 kernel is one GEMM on the input itself (no patch copy); "
          "'depthwise' is\n  the kernel for groups == channels.  Config.conv_autotune=True "
          "measures instead of predicting.")


def quantized(model, calib):
    """LeZero's post-training quantization of a zoo ResNet, on a copy."""
    prepared = Q.prepare(Q.fuse(quantizable_resnet(copy.deepcopy(model)).eval()))
    Q.calibrate(prepared, [calib])
    return Q.convert(prepared)


def int8(resnet, x):
    print("\n4. INT8: post-training quantization of the ResNet (fuse, calibrate, convert)")
    calib = rng.standard_normal(x.shape).astype(np.float32)
    q = quantized(resnet, calib)
    with lz.no_grad():
        ref, got = resnet(x).data, q(x).data
    cos = float((ref * got).sum() / np.linalg.norm(ref) / np.linalg.norm(got))
    print(f"  logits on other images: cosine similarity with float {cos:.4f}, max |error| / "
          f"max |logit| {np.abs(got - ref).max() / np.abs(ref).max():.3f}, same top-1 class "
          f"for {(got.argmax(1) == ref.argmax(1)).mean() * 100:.0f}% of {len(x)} images")
    isa = int8_gemm.ISA
    products = {"vnni512": "AVX-512 VNNI vpdpbusd (uint8 x int8)",
                "vnni256": "AVX-VNNI vpdpbusd (uint8 x int8)",
                "avx512bw": "AVX-512BW vpmaddwd (int16)", "avx2": "AVX2 vpmaddwd (int16)"}
    print(f"  int8_gemm.ISA = {isa!r}: products on "
          f"{products.get(isa, 'no fast path: the portable int16 Numba kernels')}")
    pair = [inference(q, x), inference(resnet, x)]
    serial = [on_one_thread(f) for f in pair]
    for label, fns in (("as it runs", pair), ("serial_kernels()", serial)):
        ratios, seconds = round_ratios(fns, rounds=ROUNDS)
        print(f"  INT8 / float32 (fused) inference time, {label:<17}: {ratios[0]:.2f} "
              f"({seconds[0] * 1e3:.2f} ms against {seconds[1] * 1e3:.2f} ms)")
    print("  A product big enough is split over Numba's thread pool; on a machine whose cores "
          "are busy,\n  waking the pool can cost more than the product: compare the two lines.")
    from lezero.quantization import mkl_int8
    from lezero.runtime import mkl
    print(f"  Where Intel MKL runs LeZero's products (an Intel CPU; here: {mkl.used()}), "
          f"layers of >= {mkl_int8.MIN_CHANNELS} input channels\n  may run on its exact "
          "uint8 x int8 GEMM (AMX or VNNI units) instead, in blocks of patch rows; same "
          "integers.")


def on_one_thread(fn):
    """``fn`` run with every kernel on the calling thread (``runtime.serial_kernels``)."""
    def run():
        with lezero.runtime.serial_kernels():
            return fn()
    return run


def beside_pytorch():
    """torchvision's InvertedResidual and LeZero's, the same weights and thread count."""
    print("\n5. the inverted-residual block beside PyTorch (same weights, same threads)")
    missing = [m for m in ("torch", "torchvision") if importlib.util.find_spec(m) is None]
    if missing:
        print(f"  skipped: {' and '.join(missing)} not installed (pip install torch torchvision)")
        return
    import torch
    from _real_vision import inference_fns, load_into, tv_models
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")        # a torchvision built for another torch warns
        block = tv_models().mobilenetv2.InvertedResidual
    torch.manual_seed(0)
    torch.set_num_threads(lezero.runtime.threads())
    ref = block(24, 24, 1, 6)
    ref.train()
    with torch.no_grad():                     # running statistics away from 0 and 1
        ref(torch.randn(8, 24, 32, 32))
    ours = load_into(InvertedResidual(24, 24, stride=1, expand_ratio=6), ref)
    x = rng.standard_normal((8, 24, 32, 32)).astype(np.float32)
    ours_fn, torch_fn = inference_fns(ours, ref, x)
    diff = np.abs(ours_fn().data - torch_fn().numpy()).max()
    ratios, seconds = round_ratios([ours_fn, torch_fn], rounds=ROUNDS)
    print(f"  max |LeZero - PyTorch| = {diff:.1e}; LeZero / PyTorch time {ratios[0]:.2f} "
          f"({seconds[0] * 1e3:.2f} ms against {seconds[1] * 1e3:.2f} ms, "
          f"{torch.get_num_threads()} thread(s) each)")


def shortened(text, width=58):
    """``text`` without its ``[module]`` suffix, cut at a word to ``width`` characters."""
    text = text.split(" [")[0]
    return text if len(text) <= width else text[:text.rfind(" ", 0, width - 3)] + " ..."


def runtime_and_benchmark():
    print("\n6. threads and BLAS as LeZero applied them on import (lezero.runtime.rows())")
    wanted = ("threads", "gemm", "gemm_team", "small_flops", "small_gemm_one_thread",
              "blas_thread_timeout", "OPENBLAS_THREAD_TIMEOUT", "NUMBA_NUM_THREADS",
              "OMP_NUM_THREADS")
    found = {name: (value, source, meaning)
             for _, name, value, source, meaning in lezero.runtime.rows()}
    for name in wanted:
        value, source, meaning = found[name]
        print(f"  {name:<24}{str(value):<10}{source:<22}{shortened(meaning)}")
    print("  (OPENBLAS_THREAD_TIMEOUT reads 'set' even when you did not: LeZero sets it on "
          "import, before NumPy\n  starts its BLAS threads, unless you set it yourself)")
    from threadpoolctl import threadpool_info
    for pool in threadpool_info():
        where = os.path.basename(os.path.dirname(pool["filepath"]))
        print(f"  loaded pool: {pool['internal_api']} from {where}, "
              f"{pool['num_threads']} thread(s)")
    gemm_library()
    print("  The real-size comparison with PyTorch / Hugging Face / onnxruntime, same "
          "weights and threads\n  (minutes; not run here):")
    import bench_real
    for line in bench_real.__doc__.splitlines():
        if line.strip().startswith("python benchmarks/bench_real.py"):
            print("   ", line.strip())
    print("  its rows:", ", ".join(r.key for r in bench_real.ROWS))


def gemm_library():
    """Which library runs float products, and one BERT-sized product both ways."""
    from lezero.runtime import blas, mkl, policy
    found = mkl.library() is not None
    print(f"  products: policy.gemm = {policy.gemm!r} (LEZERO_GEMM), Intel MKL "
          f"{'loaded, sequential layer' if found else 'not installed: NumPy runs them'}; "
          f"on MKL here: {mkl.used()} ('auto' puts them there on an Intel CPU only: "
          f"{mkl.intel_cpu()} here)")
    if not found:
        return
    a = rng.standard_normal((256, 768)).astype(np.float32)
    w = rng.standard_normal((3072, 768)).astype(np.float32)

    def product(mode, team=1):
        def run():
            with policy.using(gemm=mode, gemm_team=team):
                return blas.matmul(a, w.T)
        return run
    ratios, seconds = round_ratios([product("mkl"), product("numpy"), product("mkl", 0)],
                                   rounds=ROUNDS)
    print(f"  a BERT feed-forward product (256x768 @ 768x3072): MKL / NumPy's OpenBLAS time "
          f"{ratios[0]:.2f} ({seconds[0] * 1e3:.2f} ms against {seconds[1] * 1e3:.2f} ms)")
    print(f"  its blocks on the native workers (gemm_team) / on Python worker threads: "
          f"{ratios[0] / ratios[2]:.2f} ({seconds[0] * 1e3:.2f} ms against "
          f"{seconds[2] * 1e3:.2f} ms)")


def main():
    lz.manual_seed(0)
    resnet = settled(ResNet(BasicBlock, [1, 1, 1, 1], num_classes=10, small_input=True,
                            base_width=16))
    x = rng.standard_normal((8, 3, 32, 32)).astype(np.float32)
    timing_honestly(resnet, x)
    fusion(resnet, x)
    convolution_choice()
    int8(resnet, x)
    beside_pytorch()
    runtime_and_benchmark()


if __name__ == "__main__":
    main()
