"""Mixed precision: activation memory, step time and accuracy, LeZero and PyTorch (CPU).

    python benchmarks/bench_amp.py                 # all three parts
    python benchmarks/bench_amp.py --part memory   # ResNet-18 activation memory only
    python benchmarks/bench_amp.py --part accuracy --seeds 0 1 2

* memory: ResNet-18 with the CIFAR stem (bench_memory.py's workload), batch 32 of
  3x32x32, one training step, measured as a user would with ``tracemalloc``: the bytes
  alive once forward returns (autocast's parameter copies included) and the step's peak,
  gradients included (``_mem_measure.lezero_step``).  Targets (issue 34): autocast keeps
  at most 0.6x and peaks at most 0.75x of LeZero float32.  PyTorch's saved bytes
  (``saved_tensors_hooks``, each storage once, its autocast parameter copies added) stand
  beside; its CPU float16 convolutions take minutes a step, so bfloat16 (the same bytes)
  stands in.  ``python benchmarks/bench_memory.py`` has every workload.
* time: the same step; on the CPU autocast is about memory (NumPy has no float16 BLAS, so
  LeZero computes in float32 and rounds; see docs/amp.md), speed needs a GPU.
* accuracy: LeNet-5 on scikit-learn's digits (and Fashion-MNIST where a local copy exists),
  trained in float32 and with autocast + GradScaler from the same seed.  Target: test
  accuracy within 0.5 point of float32 (mean over the seeds).
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import interleaved_times, set_threads  # noqa: E402
from _record import run_main  # noqa: E402

BATCH, SIZE = 32, 32


# ----- memory and time -------------------------------------------------------------------

def lezero_resnet():
    import lezero as lz
    from lezero.nn import models
    lz.manual_seed(0)
    return models.get_model("resnet18", num_classes=10)


def lezero_step(model, x, t, dtype):
    import lezero.functions as F
    from lezero import amp

    def step():
        with amp.autocast(dtype or "float16", enabled=dtype is not None):
            loss = F.cross_entropy(model(x), t)
        loss.backward()
    return step


def torch_step(model, x, t, dtype):
    import torch

    def step():
        with torch.autocast("cpu", dtype=dtype or torch.float16, enabled=dtype is not None):
            loss = torch.nn.functional.cross_entropy(model(x), t)
        loss.backward()
    return step


def setup():
    """One batch, and ResNet-18 in LeZero and in torchvision with the same weights."""
    import lezero as lz
    import torch
    from lezero.testing.oracles import import_torchvision
    rng = np.random.default_rng(0)
    xn = rng.standard_normal((BATCH, 3, SIZE, SIZE)).astype(np.float32)
    tn = rng.integers(0, 10, BATCH)
    torch.manual_seed(0)
    tmodel = import_torchvision().models.resnet18(num_classes=10)
    model = lezero_resnet()
    model.load_state_dict({k: v.detach().numpy().copy() for k, v in tmodel.state_dict().items()})
    return (model, lz.Variable(xn, requires_grad=False), tn,
            tmodel, torch.tensor(xn), torch.tensor(tn))


def memory_part(dtypes):
    """LeZero float32 against autocast(dtype) for each of ``dtypes`` on ResNet-18 (CIFAR
    stem); PyTorch's saved bytes beside."""
    import _mem_table as T
    from _mem_measure import lezero_step, torch_step
    from _mem_workloads import build_pair
    theirs, ours = build_pair("resnet18")
    results = {("resnet18", d or "float32"): {"lezero": lezero_step(ours, d)}
               for d in [None] + dtypes}
    saved = {d: torch_step(theirs, d) for d in (None, "bfloat16")}
    print(f"\n== ResNet-18 (CIFAR stem), batch 32 of 3x32x32: LeZero autocast against "
          f"LeZero float32, tracemalloc (kept must <= {T.AUTOCAST_KEPT}, peak must <= "
          f"{T.AUTOCAST_PEAK})")
    head = ["workload", "dtype", "kept MiB", "ratio", "peak MiB", "ratio"]
    base = results[("resnet18", "float32")]["lezero"]
    rows = [["resnet18", "float32", T.mib(base["kept"]), "1.00", T.mib(base["peak"]), "1.00"]]
    print("\n".join(T.table(head, rows + T.autocast_rows(results, ["resnet18"], dtypes))))
    kept = {d: f["kept"] + f["copies"] for d, f in saved.items()}
    print(f"PyTorch saved for backward (its autocast parameter copies included): float32 "
          f"{T.mib(kept[None])} MiB, bfloat16 {T.mib(kept['bfloat16'])} MiB "
          f"({T.cell(T.ratio(kept['bfloat16'], kept[None]))})")
    return results, saved


def time_part(rounds):
    import torch
    model, x, tn, tmodel, xt, tt = setup()
    fns = [lezero_step(model, x, tn, None), lezero_step(model, x, tn, "float16"),
           torch_step(tmodel, xt, tt, None), torch_step(tmodel, xt, tt, torch.float16)]
    best = [min(t) for t in interleaved_times(fns, rounds=rounds, warmup=1)]
    print(f"\n== ResNet-18 step time (forward + backward), best of {rounds} rounds")
    print(f"LeZero: float32 {best[0]:.2f} s, float16 autocast {best[1]:.2f} s "
          f"({best[1] / best[0]:.2f}x)")
    print(f"torch:  float32 {best[2]:.2f} s, float16 autocast {best[3]:.2f} s "
          f"({best[3] / best[2]:.2f}x)")
    return best


# ----- accuracy --------------------------------------------------------------------------

def load(name):
    """((x, t), (x_test, t_test)) as float32 NCHW and int64, or None when absent."""
    from lezero.data import datasets
    if name == "digits":
        tr, te = datasets.Digits(True), datasets.Digits(False)
        return ((tr.data[:, None], tr.targets), (te.data[:, None], te.targets))
    for root in (datasets.DEBIAN_FASHION_MNIST, None):
        try:
            tr = datasets.FashionMNIST(root, train=True)
            te = datasets.FashionMNIST(root, train=False)
        except (FileNotFoundError, OSError):
            continue
        f = lambda d: (d.data[:, None] / np.float32(255)).astype(np.float32)  # noqa: E731
        return ((f(tr), tr.targets), (f(te), te.targets))
    return None


def train_lenet(data, use_amp, seed, epochs, batch=64, lr=1e-2):
    """Test accuracy of LeNet-5 after ``epochs`` of AdamW (float32 or autocast+GradScaler)."""
    import lezero as lz
    import lezero.functions as F
    from lezero import amp, optim
    from lezero.nn.models import LeNet5
    (x, t), (xt, tt) = data
    lz.manual_seed(seed)
    model = LeNet5(10, 1, x.shape[-1])
    opt = optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    scaler = amp.GradScaler(enabled=use_amp)
    rng = np.random.default_rng(seed)
    skipped = 0
    for _ in range(epochs):
        order = rng.permutation(len(x))
        for i in range(0, len(x), batch):
            idx = order[i:i + batch]
            opt.zero_grad()
            with amp.autocast(enabled=use_amp):
                loss = F.cross_entropy(model(lz.Variable(x[idx], requires_grad=False)),
                                       t[idx])
            scaler.scale(loss).backward()
            skipped += not scaler.step(opt).stepped
            scaler.update()
    model.eval()
    correct = 0
    with lz.no_grad(), amp.autocast(enabled=use_amp):
        for i in range(0, len(xt), 256):
            logits = model(lz.Variable(xt[i:i + 256], requires_grad=False))
            correct += int((logits.data.argmax(axis=1) == tt[i:i + 256]).sum())
    return correct / len(xt), skipped


def accuracy_part(seeds, epochs, fashion_epochs):
    print("\n== LeNet-5 test accuracy, float32 vs autocast(float16) + GradScaler")
    for name, n_epochs in (("digits", epochs), ("fashion-mnist", fashion_epochs)):
        data = load(name)
        if data is None:
            print(f"{name}: no local copy (FashionMNIST(root) finds none); skipped")
            continue
        rows = []
        for seed in seeds:
            t0 = time.perf_counter()
            a32, _ = train_lenet(data, False, seed, n_epochs)
            t1 = time.perf_counter()
            a16, skipped = train_lenet(data, True, seed, n_epochs)
            t2 = time.perf_counter()
            rows.append((a32, a16))
            print(f"{name} seed {seed}: float32 {a32 * 100:.2f}% ({t1 - t0:.0f} s), "
                  f"amp {a16 * 100:.2f}% ({t2 - t1:.0f} s, {skipped} skipped steps)")
        m32, m16 = (np.mean([r[i] for r in rows]) * 100 for i in (0, 1))
        print(f"{name} mean: float32 {m32:.2f}%, amp {m16:.2f}%: difference "
              f"{m16 - m32:+.2f} points (target within 0.5)")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--part", choices=("all", "memory", "time", "accuracy"), default="all")
    p.add_argument("--bf16", action="store_true", help="also measure bfloat16 memory")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--epochs", type=int, default=12)
    p.add_argument("--fashion-epochs", type=int, default=2)
    args = p.parse_args(argv)
    print(f"threads: {set_threads()}")
    if args.part in ("all", "memory"):
        memory_part(["float16"] + (["bfloat16"] if args.bf16 else []))
    if args.part in ("all", "time"):
        time_part(args.rounds)
    if args.part in ("all", "accuracy"):
        accuracy_part(args.seeds, args.epochs, args.fashion_epochs)


if __name__ == "__main__":
    run_main(main)
