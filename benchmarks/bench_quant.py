"""INT8 quantization: model size, accuracy (PTQ, QAT, PyTorch's PTQ) and speed (kernels
and whole models, against float32 and onnxruntime on the same QDQ model).

    python benchmarks/bench_quant.py                       # every section
    python benchmarks/bench_quant.py size accuracy         # some of: size accuracy
                                                           #   kernels e2e
    BENCH_THREADS=2 python benchmarks/bench_quant.py e2e   # threads (default 1)
    BENCH_THREADS=2 python benchmarks/bench_quant.py resnet  # ImageNet-size ResNet-18

ResNet (issue 35's INT8 rows): the zoo's ResNet-18 (1000 classes) at batch 8 224x224 and
batch 1 112x112: LeZero INT8 (PTQ) against LeZero float32 and PyTorch's INT8 (x86 eager
PTQ, the same weights), median of the per-round ratios; the INT8 product in use
(lezero.kernels.int8_gemm.ISA) is printed.

Kernels: the INT8 GEMM (uint8 activations x int8 weights, int16 products summed in
int32, fixed-point requantization, the int16 widening of the input included) against
NumPy's float32 matmul (OpenBLAS) on the same shapes, and the INT8 convolution
(patches + GEMM) against the float32 GEMM of the same patch matrix and LeZero's float32
``F.conv2d``.  The machine's limits are printed beside: float32 FMA and int8 dot
products per cycle on AVX2 and AVX512-VNNI, from the CPU flags and the clock.
Whole models: LeNet-5 (8x8 digits) and ResNet-18 (32x32, base width 64) at batch 1
and 32 in eval mode: LeZero float32, LeZero INT8, onnxruntime INT8 (the QDQ export)
and onnxruntime float32, timed in interleaved rounds (best and median).
"""
import os
import sys

THREADS = int(os.environ.get("BENCH_THREADS", "1"))
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
             "NUMBA_NUM_THREADS"):
    os.environ[_var] = str(THREADS)

import datetime  # noqa: E402
import platform  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import interleaved_best_median, limit_threads  # noqa: E402
from _record import run_main  # noqa: E402

SECTIONS = ("size", "accuracy", "kernels", "e2e", "resnet")


# ----- models --------------------------------------------------------------------------------

def digits_data():
    from lezero.data.datasets import Digits
    tr, te = Digits(train=True), Digits(train=False)
    return (tr.data[:, None].copy(), tr.targets), (te.data[:, None].copy(), te.targets)


def accuracy(model, x, t):
    import lezero as lz
    model.eval()
    with lz.no_grad():
        pred = np.concatenate([model(x[i:i + 256]).data.argmax(1) for i in
                               range(0, len(x), 256)])
    return float((pred == t).mean())


def train(model, x, t, epochs, lr, seed=0, on_epoch=None, quantizer_lr=None):
    """Adam with cosine decay; ``quantizer_lr``: the learning rate of LSQ's scales and
    zero points (Adam moves every parameter by about lr per step, far too much for a
    scale of 1e-3, so they get their own)."""
    import lezero.functions as F
    from lezero import optim
    quantizer = ("process.scale", "process.zero_point", "quant.scale", "quant.zero_point")
    groups = [{"params": [p for n, p in model.named_parameters()
                          if not n.endswith(quantizer)]}]
    special = [p for n, p in model.named_parameters() if n.endswith(quantizer)]
    if special:
        groups.append({"params": special, "lr": quantizer_lr or lr})
    opt = optim.Adam(groups, lr=lr)
    steps = epochs * -(-len(x) // 64)
    sched = optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps)
    for epoch in range(epochs):
        if on_epoch:
            on_epoch(epoch, model)
        model.train()
        order = np.random.default_rng([seed, epoch]).permutation(len(x))
        for i in range(0, len(x), 64):
            idx = order[i:i + 64]
            loss = F.cross_entropy(model(x[idx]), t[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
    return model.eval()


def resnet18(seed=0, base_width=64):
    import lezero as lz
    from lezero import nn
    lz.manual_seed(seed)
    return nn.models.get_model("resnet18", num_classes=10, small_input=True,
                               base_width=base_width).eval()


def ptq(model, wrap, calib, qconfig=None):
    import copy
    from lezero import quantization as Q
    prepared = Q.prepare(Q.fuse(wrap(copy.deepcopy(model)).eval()), qconfig=qconfig)
    Q.calibrate(prepared, calib)
    return Q.convert(prepared)


# ----- size ----------------------------------------------------------------------------------

def section_size():
    from lezero import quantization as Q
    from lezero.nn.models import LeNet5
    from lezero.quantization.models import quantizable_resnet
    x = np.random.default_rng(0).random((8, 1, 8, 8), dtype=np.float32)
    lenet = LeNet5(10, 1, 8).eval()
    rows = [("LeNet-5 (digits 8x8)", lenet, ptq(lenet, Q.QuantWrapper, [x]))]
    res = resnet18()
    xr = np.random.default_rng(0).standard_normal((2, 3, 32, 32)).astype(np.float32)
    rows.append(("ResNet-18 (32x32, width 64)", res, ptq(res, quantizable_resnet, [xr])))
    print("\n== size: state_dict bytes (target: INT8 <= 0.27x float32)")
    print(f"{'model':<44}{'params':>11}{'float32':>12}{'INT8':>12}{'ratio':>8}")
    for name, f, q in rows:
        a, b = Q.model_size(f), Q.model_size(q)
        print(f"{name:<44}{f.num_parameters():>11,}{a / 1024:>10.1f}Ki{b / 1024:>10.1f}Ki"
              f"{b / a:>8.3f} {'ok' if b / a <= 0.27 else 'MISS'}")


# ----- accuracy ------------------------------------------------------------------------------

def torch_ptq_accuracy(lenet, calib, test):
    """PyTorch's eager PTQ (x86 qconfig) on the same float LeNet-5 weights."""
    import warnings
    with warnings.catch_warnings():         # torch.ao.quantization's deprecation notes
        warnings.simplefilter("ignore")
        return _torch_ptq(lenet, calib, test)


def _torch_ptq(lenet, calib, test):
    import torch
    from torch import nn as tnn
    import torch.ao.quantization as tq
    m = tnn.Sequential(tnn.Conv2d(1, 6, 5, padding=2), tnn.ReLU(), tnn.MaxPool2d(2),
                       tnn.Conv2d(6, 16, 5, padding=2), tnn.ReLU(), tnn.MaxPool2d(2),
                       tnn.Flatten(), tnn.Linear(64, 120), tnn.ReLU(), tnn.Linear(120, 84),
                       tnn.ReLU(), tnn.Linear(84, 10))
    src = [p for _, p in lenet.named_parameters()]
    with torch.no_grad():
        for p, q in zip(m.parameters(), src):
            p.copy_(torch.tensor(q.data))
    model = tq.QuantWrapper(m).eval()
    model.qconfig = tq.get_default_qconfig("x86")
    torch.backends.quantized.engine = "x86"
    tq.fuse_modules(m, [["0", "1"], ["3", "4"], ["7", "8"], ["9", "10"]], inplace=True)
    tq.prepare(model, inplace=True)
    with torch.no_grad():
        for xb in calib:
            model(torch.tensor(xb))
    tq.convert(model, inplace=True)
    with torch.no_grad():
        pred = model(torch.tensor(test[0])).argmax(1).numpy()
    return float((pred == test[1]).mean())


def _qat(model, wrap, x, t, epochs, qconfig=None):
    import copy
    from lezero import quantization as Q
    qat = Q.prepare_qat(Q.fuse(wrap(copy.deepcopy(model)).train(), qat=True), qconfig=qconfig)

    def freeze(epoch, m):
        if epoch >= max(1, epochs // 2):
            Q.freeze_bn_stats(m)
    train(qat, x, t, epochs, 1e-3, seed=1, on_epoch=freeze, quantizer_lr=1e-5)
    return Q.convert(Q.disable_observer(qat.eval()))


def _accuracy_rows(name, model, wrap, train_data, test, calib, qat_epochs, torch_ref=None):
    from lezero import quantization as Q
    fa = accuracy(model, *test)
    rows = [("float32", fa)]
    rows.append(("PTQ (MinMax observers)", accuracy(ptq(model, wrap, calib), *test)))
    rows.append(("PTQ (histogram, percentile)",
                 accuracy(ptq(model, wrap, calib, Q.histogram_qconfig), *test)))
    rows.append((f"QAT ({qat_epochs} epochs, fake quant)",
                 accuracy(_qat(model, wrap, *train_data, qat_epochs), *test)))
    rows.append((f"QAT LSQ ({qat_epochs} epochs)",
                 accuracy(_qat(model, wrap, *train_data, qat_epochs, Q.lsq_qat_qconfig),
                          *test)))
    if torch_ref is not None:
        rows.append(("PyTorch PTQ (x86, same weights)", torch_ref()))
    print(f"\n== accuracy: {name} (target: drop < 1 point, QAT >= PTQ)")
    for label, acc in rows:
        print(f"{label:<36}{acc * 100:>8.2f}%{(acc - fa) * 100:>+9.2f} points")


def section_accuracy(quick=False):
    import lezero as lz
    from lezero import quantization as Q
    from lezero.nn.models import LeNet5
    train_data, test = digits_data()
    lz.manual_seed(0)
    t0 = time.perf_counter()
    lenet = train(LeNet5(10, 1, 8), *train_data, epochs=4 if quick else 12, lr=1e-2)
    print(f"\n(LeNet-5 trained on digits in {time.perf_counter() - t0:.1f} s)")
    calib = [train_data[0][i:i + 64] for i in range(0, 512, 64)]
    _accuracy_rows("LeNet-5 on scikit-learn digits (359 test images)", lenet,
                   Q.QuantWrapper, train_data, test, calib, 1 if quick else 3,
                   lambda: torch_ptq_accuracy(lenet, calib, test))
    fashion_mnist(quick)


def fashion_mnist(quick):
    import lezero as lz
    from lezero import quantization as Q
    from lezero.data.datasets import DEBIAN_FASHION_MNIST, FashionMNIST
    from lezero.nn.models import LeNet5
    try:
        tr = FashionMNIST(root=DEBIAN_FASHION_MNIST, train=True)
        te = FashionMNIST(root=DEBIAN_FASHION_MNIST, train=False)
    except (OSError, RuntimeError, ValueError) as e:
        print(f"\n== accuracy: Fashion-MNIST skipped: not installed "
              f"({DEBIAN_FASHION_MNIST}; Debian's dataset-fashion-mnist package): "
              f"{type(e).__name__}")
        return
    def arrays(ds, n):
        x = np.asarray(ds.data[:n], np.float32)[:, None] / 255.0
        return np.ascontiguousarray(x), np.asarray(ds.targets[:n], np.int64)
    train_data, test = arrays(tr, 12000 if quick else 60000), arrays(te, 10000)
    lz.manual_seed(0)
    model = train(LeNet5(10, 1, 28), *train_data, epochs=1 if quick else 4, lr=3e-3)
    calib = [train_data[0][i:i + 64] for i in range(0, 512, 64)]
    _accuracy_rows("LeNet-5 on Fashion-MNIST (10000 test images)", model, Q.QuantWrapper,
                   train_data, test, calib, 1)


# ----- kernels -------------------------------------------------------------------------------

def cpu_limits():
    """(GHz, {name: ops per cycle per core}) from /proc/cpuinfo."""
    flags, mhz = set(), None
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags") and not flags:
                    flags = set(line.split(":")[1].split())
                if line.startswith("cpu MHz") and mhz is None:
                    mhz = float(line.split(":")[1])
    except OSError:
        pass
    limits = {}
    if "avx2" in flags and "fma" in flags:
        limits["float32 FMA, AVX2 (2 x 8 lanes x 2)"] = 32
        limits["int8 vpmaddubsw+vpmaddwd, AVX2 (2 x 32 MACs / 2 cycles x 2)"] = 64
    if "avx512_vnni" in flags or "avx_vnni" in flags:
        limits["int8 vpdpbusd, VNNI (2 x 32 MACs x 2)"] = 128
        limits["int16 vpdpwssd, VNNI (2 x 16 MACs x 2): these kernels"] = 64
    return (mhz or 0) / 1000, limits


def section_kernels(quick=False):
    import lezero.functions as F
    from lezero.core import no_grad
    from lezero.quantization import kernels as K
    from lezero.quantization import reference as R
    from lezero.quantization.fixed_point import quantize_multiplier
    rng = np.random.default_rng(0)
    ghz, limits = cpu_limits()
    rounds = 3 if quick else 7
    print(f"\n== kernels, {THREADS} thread(s); CPU {platform.processor() or platform.machine()}"
          f" at {ghz:.2f} GHz; limits per core per cycle:")
    for name, ops in limits.items():
        print(f"   {name:<62}{ops:>5} ops  = {ops * ghz * THREADS:>6.0f} Gop/s")
    print(f"{'GEMM M x K x N':<26}{'INT8':>10}{'f32 BLAS':>10}{'INT8 Gop/s':>12}"
          f"{'f32 GF/s':>10}{'INT8/f32':>9}{'INT8 op/cyc':>12}")
    for m, k, n in [(1, 512, 512), (32, 512, 512), (256, 1152, 128), (1024, 576, 64),
                    (1024, 27, 64)]:
        x = rng.integers(0, 256, (m, k)).astype(np.uint8)
        w16 = rng.integers(-127, 128, (n, k)).astype(np.int16)
        bias = np.zeros(n, np.int32)
        mult, shift = quantize_multiplier(np.full(n, 1e-4))
        xf, wf = x.astype(np.float32), w16.astype(np.float32)

        def int8():
            a = x.astype(np.int16) - np.int16(3)
            return K.gemm_requant(a, w16, bias, mult, shift, 0, 0, 255, np.uint8)
        (ti, _), (tf, _) = interleaved_best_median([int8, lambda: xf @ wf.T], rounds)
        ops = 2 * m * k * n
        print(f"{f'{m} x {k} x {n}':<26}{ti * 1e3:>8.3f}ms{tf * 1e3:>8.3f}ms"
              f"{ops / ti / 1e9:>12.1f}{ops / tf / 1e9:>10.1f}{ti / tf:>9.2f}"
              f"{ops / ti / 1e9 / max(ghz * THREADS, 1e-9):>12.1f}")
    print(f"{'conv N,C,HxW -> O, 3x3':<26}{'INT8':>10}{'f32 GEMM':>10}{'LZ conv':>10}"
          f"{'INT8 Gop/s':>12}{'LZ/INT8':>9}")
    for nb, c, hw, o in [(1, 64, 32, 64), (1, 256, 8, 256), (32, 64, 32, 64),
                         (32, 128, 16, 128)][:3 if quick else 4]:
        x = rng.integers(0, 256, (nb, c, hw, hw)).astype(np.uint8)
        geo = R.geometry((hw, hw), (3, 3), (1, 1), (1, 1))
        w16 = rng.integers(-127, 128, (o, c * 9)).astype(np.int16)
        bias = np.zeros(o, np.int32)
        mult, shift = quantize_multiplier(np.full(o, 1e-4))
        xf = x.astype(np.float32)
        wf = rng.standard_normal((o, c, 3, 3)).astype(np.float32)
        col = K.im2col(x, 3, geo).astype(np.float32)
        w2 = w16.astype(np.float32)

        def int8():
            return K.conv2d(x, 3, geo, w16, bias, mult, shift, 0, 0, 255, np.uint8)

        def lz_conv():
            with no_grad():
                return F.conv2d(xf, wf, None, 1, 1)
        (ti, _), (tg, _), (tc, _) = interleaved_best_median(
            [int8, lambda: np.matmul(w2, col.transpose(0, 2, 1)), lz_conv], rounds)
        ops = 2 * nb * o * c * 9 * hw * hw
        print(f"{f'{nb},{c},{hw}x{hw} -> {o}':<26}{ti * 1e3:>8.2f}ms{tg * 1e3:>8.2f}ms"
              f"{tc * 1e3:>8.2f}ms{ops / ti / 1e9:>12.1f}{tc / ti:>9.2f}")


# ----- whole models --------------------------------------------------------------------------

def _ort(path):
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = THREADS
    opts.inter_op_num_threads = 1
    return ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])


def _output_step(int8):
    from lezero import quantization as Q
    last = [m for m in int8.modules() if isinstance(m, (Q.QuantLinear, Q.QuantConv2d))][-1]
    return float(last.scale)


def _e2e_model(name, model, wrap, example, batches, rounds, tmp, agreement):
    import lezero as lz
    from lezero import quantization as Q
    calib = [example(8, s) for s in range(4)]
    int8 = ptq(model, wrap, calib)
    qpath, fpath = os.path.join(tmp, f"{name}_int8.onnx"), os.path.join(tmp, f"{name}.onnx")
    dyn = {"input_0": {0: "batch"}, "output_0": {0: "batch"}}
    report = Q.export_onnx(int8, example(2, 9), qpath, dynamic_axes=dyn, steps=8)
    lz.onnx.export(model, example(2, 9), fpath, dynamic_axes=dyn)
    qs, fs = _ort(qpath), _ort(fpath)
    x = example(32, 12)
    with lz.no_grad():
        diff = np.abs(qs.run(None, {"input_0": x})[0] - int8(x).data) / _output_step(int8)
    agreement.append(f"{name}: onnxruntime INT8 vs LeZero INT8 on 32 inputs: max "
                     f"{diff.max():.0f}, mean {diff.mean():.3f} output steps "
                     f"({(diff > 0.5).mean() * 100:.1f}% of outputs differ)")
    del report
    for n in batches:
        x = example(n, 11)

        def run(m):
            def f():
                with lz.no_grad():
                    return m(x)
            return f
        fns = [run(model), run(int8), lambda: qs.run(None, {"input_0": x}),
               lambda: fs.run(None, {"input_0": x})]
        res = interleaved_best_median(fns, rounds if n == 1 else max(3, rounds // 3))
        (lf, lfm), (li, lim), (oi, oim), (of, ofm) = res
        print(f"{name + f' batch {n}':<26}" + "".join(
            f"{f'{b * 1e3:.2f}/{m * 1e3:.2f}':<17}" for b, m in res)
            + f"{lf / li:>9.2f}{oi / li:>8.2f}")


def section_e2e(quick=False):
    from lezero import quantization as Q
    from lezero.nn.models import LeNet5
    from lezero.quantization.models import quantizable_resnet
    import lezero as lz
    lz.manual_seed(0)
    print(f"\n== whole models, eval, {THREADS} thread(s): milliseconds best/median")
    print(f"{'model':<26}{'LeZero f32':<17}{'LeZero INT8':<17}{'ORT INT8 QDQ':<17}"
          f"{'ORT f32':<17}{'f32/INT8':>9}{'ORT/LZ':>8}")
    lenet = LeNet5(10, 1, 8).eval()
    digits = digits_data()[0][0]
    agreement = []
    with tempfile.TemporaryDirectory() as tmp:
        _e2e_model("LeNet-5 8x8", lenet, Q.QuantWrapper,
                   lambda n, s: digits[s * 8:s * 8 + n], (1, 32), 8 if quick else 30, tmp,
                   agreement)
        res = resnet18()

        def images(n, s):
            return np.random.default_rng(s).standard_normal((n, 3, 32, 32)).astype(
                np.float32)
        _e2e_model("ResNet-18 32x32", res, quantizable_resnet, images, (1, 32),
                   3 if quick else 8, tmp, agreement)
    print("\n".join(agreement))


def _torch_int8_resnet(model, calib):
    """torchvision's quantizable ResNet-18 with LeZero's weights, x86 eager PTQ."""
    import warnings
    import torch
    import torch.ao.quantization as tq
    from lezero.testing.oracles import import_torchvision
    import_torchvision()
    from torchvision.models.quantization import resnet18 as qresnet18
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = qresnet18(weights=None, quantize=False).eval()
        t.load_state_dict({k: torch.tensor(np.asarray(getattr(v, "data", v)))
                           for k, v in model.state_dict().items()}, strict=False)
        torch.backends.quantized.engine = "x86"
        t.fuse_model()
        t.qconfig = tq.get_default_qconfig("x86")
        tq.prepare(t, inplace=True)
        with torch.no_grad():
            for c in calib:
                t(torch.tensor(c))
        tq.convert(t, inplace=True)
    return t


def section_resnet(quick=False):
    import torch
    import lezero as lz
    from lezero import nn
    from lezero.kernels import int8_gemm
    from lezero.quantization.models import quantizable_resnet
    from _common import interleaved_times
    torch.set_num_threads(THREADS)
    print(f"\n== ResNet-18 (1000 classes), eval, {THREADS} thread(s), INT8 product "
          f"{int8_gemm.ISA}: milliseconds (median), ratios median of rounds")
    print(f"{'shape':<18}{'LZ f32':>9}{'LZ INT8':>9}{'torch INT8':>11}{'INT8/f32':>10}"
          f"{'INT8/torch':>11}{'top-1 agree':>12}")
    for n, hw in ((8, 224), (1, 112)):
        lz.manual_seed(0)
        model = nn.models.get_model("resnet18", num_classes=1000).eval()
        rng = np.random.default_rng(0)
        calib = [rng.standard_normal((2, 3, hw, hw)).astype(np.float32) for _ in range(2)]
        int8 = ptq(model, quantizable_resnet, calib)
        tq = _torch_int8_resnet(model, calib)
        x = rng.standard_normal((n, 3, hw, hw)).astype(np.float32)
        xt = torch.tensor(x)

        def run(m):
            def f():
                with lz.no_grad():
                    return m(x).data
            return f

        def torch_run():
            with torch.no_grad():
                return tq(xt)
        agree = float((run(model)().argmax(1) == run(int8)().argmax(1)).mean())
        times = interleaved_times([run(model), run(int8), torch_run],
                                  3 if quick else (5 if n > 1 else 15), 2, pause=0.02)
        f32, i8, ti = (np.asarray(t) for t in times)
        print(f"{f'batch {n}, {hw}x{hw}':<18}{np.median(f32) * 1e3:>9.1f}"
              f"{np.median(i8) * 1e3:>9.1f}{np.median(ti) * 1e3:>11.1f}"
              f"{np.median(i8 / f32):>10.2f}{np.median(i8 / ti):>11.2f}{agree:>12.2f}")


def main(argv):
    quick = "--quick" in argv
    chosen = [a for a in argv if a in SECTIONS] or list(SECTIONS)
    unknown = [a for a in argv if a not in SECTIONS and a != "--quick"]
    if unknown:
        raise SystemExit(f"bench_quant: unknown sections {unknown}; choose from {SECTIONS}")
    print(f"bench_quant {datetime.date.today().isoformat()}, {THREADS} thread(s), "
          f"{platform.machine()}, load average {os.getloadavg()[0]:.1f}")
    with limit_threads(THREADS):
        for name in chosen:
            t0 = time.perf_counter()
            globals()[f"section_{name}"](*(() if name == "size" else (quick,)))
            print(f"({name}: {time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    run_main(lambda: main(sys.argv[1:]))
