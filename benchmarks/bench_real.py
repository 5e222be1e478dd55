"""Real-size speed beside the reference (issue 35): LeZero's time over PyTorch's, Hugging
Face's or onnxruntime's on the same weights, in one process, with the same thread count
(2 unless ``BENCH_THREADS`` says otherwise), each row at its issue shape and a second
batch and image/sequence size.

    python benchmarks/bench_real.py                     # every row, both shapes
    python benchmarks/bench_real.py resnet18_train bert # rows whose key has a word
    python benchmarks/bench_real.py --quick             # fewer rounds
    python benchmarks/bench_real.py --shape second      # one shape: first, second, tiny
    python benchmarks/bench_real.py --list              # the row keys
    python benchmarks/bench_real.py --record            # also docs/figures/real.md

The environment is the user's default: the benchmark sets no variable; the thread count
goes through ``torch.set_num_threads``, threadpoolctl and Numba on both sides alike, and
LeZero applies whatever its runtime applies on import.  Weights are random (nothing
downloads).  A row times warm alternating rounds (a short block of steps of each side,
the order reversed every round; the fastest step of each block counts) and prints the
median of the per-round ratios beside the issue's "must" and "aim".  ``tiny`` shapes
(``--shape tiny``) only keep the script from rotting: their figures mean nothing.
"""
import os
import sys
import warnings
from collections import namedtuple

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _common import limit_threads, round_ratios  # noqa: E402
from _record import cpu_name, run_main  # noqa: E402

THREADS = int(os.environ.get("BENCH_THREADS", 2))
SHAPE_NAMES = ("first", "second", "tiny")
_LIMITS = []                 # the thread limit, kept for the whole run

Row = namedtuple("Row", "key title reference builder shapes must aim rounds block")


def _lazy(module, name, *args):
    """A builder that imports ``module`` only when the row runs."""
    def build(shape):
        import importlib
        target = getattr(importlib.import_module(module), name)
        return (target(*args) if args else target)(shape)
    return build


def _img(batch, size):
    return {"batch": batch, "size": size}


def _seq(batch, seq, **more):
    return {"batch": batch, "seq": seq, **more}


ROWS = [
    Row("resnet18_train", "ResNet-18 SGD step", "torchvision",
        _lazy("_real_vision", "resnet18_train"),
        (_img(8, 224), _img(16, 160), _img(2, 32)), 1.2, 1.0, 5, 1),
    Row("resnet50_infer", "ResNet-50 inference", "torchvision",
        _lazy("_real_vision", "inference", "resnet50"),
        (_img(1, 224), _img(4, 160), _img(1, 32)), 1.2, 1.0, 7, 2),
    Row("mobilenet_v2_infer", "MobileNetV2 inference", "torchvision",
        _lazy("_real_vision", "inference", "mobilenet_v2"),
        (_img(8, 224), _img(2, 160), _img(1, 32)), 1.2, 1.0, 7, 2),
    Row("vit_b16_infer", "ViT-B/16 inference", "torchvision",
        _lazy("_real_vision", "inference", "vit_b_16"),
        (_img(1, 224), _img(4, 160), _img(1, 32)), 1.0, 0.9, 7, 2),
    Row("bert_infer", "BERT-base (MLM) inference", "transformers",
        _lazy("_real_text", "bert_inference"),
        (_seq(2, 128), _seq(8, 64), _seq(1, 8, layers=1)), 1.0, 0.9, 7, 2),
    Row("gpt2_train", "GPT-2 small AdamW step", "transformers",
        _lazy("_real_text", "gpt2_train"),
        (_seq(2, 128), _seq(1, 256), _seq(1, 8, layers=1)), 1.0, 0.9, 5, 1),
    Row("gpt2_generate", "GPT-2 small greedy, 32 new tokens", "HF generate",
        _lazy("_real_text", "gpt2_generate"),
        (_seq(1, 16, new=32), _seq(4, 64, new=32), _seq(1, 4, new=2, layers=1)),
        1.0, 0.9, 5, 1),
    Row("int8_vs_float", "INT8 ResNet-18 PTQ inference", "LeZero float32",
        _lazy("_real_vision", "int8_vs_float"),
        (_img(8, 224), _img(2, 160), _img(1, 32)), 0.5, 0.25, 5, 1),
    Row("int8_vs_torch", "INT8 ResNet-18 PTQ inference", "PyTorch INT8 x86",
        _lazy("_real_vision", "int8_vs_torch"),
        (_img(8, 224), _img(2, 160), _img(1, 32)), 2.0, 1.0, 5, 1),
    Row("onnxruntime", "float ResNet-18 inference", "onnxruntime",
        _lazy("_real_vision", "float_vs_onnxruntime"),
        (_img(8, 224), _img(2, 160), _img(1, 32)), 1.3, 1.0, 7, 2),
    Row("fusion_mobilenet_v2", "MobileNetV2 inference, fused", "LeZero unfused",
        _lazy("_real_vision", "fused_vs_unfused", "mobilenet_v2"),
        (_img(8, 224), _img(2, 160), _img(1, 32)), 1.0, 0.9, 5, 1),
    Row("fusion_resnet50", "ResNet-50 inference, fused", "LeZero unfused",
        _lazy("_real_vision", "fused_vs_unfused", "resnet50"),
        (_img(1, 224), _img(4, 160), _img(1, 32)), 1.0, 0.9, 5, 1),
    Row("lenet", "LeNet-5 SGD step", "PyTorch", _lazy("_real_small", "lenet"),
        ({"batch": 64}, {"batch": 256}, {"batch": 2}), 1.2, 1.0, 11, 4),
    Row("lstm", "nn.LSTM h256 fwd+bwd", "PyTorch", _lazy("_real_small", "lstm"),
        (_seq(20, 35), _seq(64, 70), _seq(2, 3)), 1.2, 1.0, 7, 3),
    Row("mlp", "MLP 784-1000-1000-10 step", "PyTorch", _lazy("_real_small", "mlp"),
        ({"batch": 100}, {"batch": 256}, {"batch": 2}), 1.2, 1.0, 7, 3),
    Row("gpt_mini", "GPT-mini 2L d128 step", "PyTorch", _lazy("_real_small", "gpt_mini"),
        (_seq(16, 64), _seq(32, 32), _seq(1, 4)), 1.2, 1.0, 7, 2),
    Row("conv3x3", "conv3x3 64->64 fwd+bwd", "PyTorch", _lazy("_real_small", "conv"),
        (_img(32, 32), _img(8, 56), _img(1, 4)), 1.2, 1.0, 7, 2),
    Row("add_forward", "2000 adds, forward", "PyTorch",
        _lazy("_real_small", "add", False),
        ({"n": 1, "calls": 2000}, {"n": 4096, "calls": 2000}, {"n": 1, "calls": 10}),
        1.2, 1.0, 11, 3),
    Row("add_backward", "2000 adds, forward+backward", "PyTorch",
        _lazy("_real_small", "add", True),
        ({"n": 1, "calls": 2000}, {"n": 4096, "calls": 2000}, {"n": 1, "calls": 10}),
        1.2, 1.0, 11, 3),
]


def shape_text(shape):
    """``b8 224x224``, ``b2 s128 +32``: a row's shape in a few characters."""
    parts = []
    for key, fmt in (("batch", "b{}"), ("size", "{0}x{0}"), ("seq", "s{}"), ("new", "+{}"),
                     ("n", "n{}"),
                     ("calls", "x{}"), ("layers", "{}L")):
        if key in shape:
            parts.append(fmt.format(shape[key]))
    return " ".join(parts)


def choose(words):
    """The rows whose key contains one of ``words`` (all rows: no words)."""
    rows = [r for r in ROWS if not words or any(w in r.key for w in words)]
    if not rows:
        raise SystemExit(f"bench_real: no row matches {words}; rows: "
                         f"{', '.join(r.key for r in ROWS)}")
    return rows


def measure(row, shape, quick):
    """(ratio, LeZero seconds, reference seconds) of ``row`` at ``shape``."""
    ours, ref = row.builder(shape)
    rounds, block = (2, 1) if quick else (row.rounds, row.block)
    ratios, seconds = round_ratios([ours, ref], rounds=rounds, warmup=1 if quick else 2,
                                   block=block)
    return ratios[0], seconds[0], seconds[1]


def _seconds(s):
    return f"{s * 1e3:.1f} ms" if s < 1 else f"{s:.2f} s"


def header():
    """What the table was measured on."""
    import numpy as np
    import torch
    cpu = cpu_name()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return [f"LeZero time / reference time, {THREADS} threads each, {cpu}, "
            f"{os.cpu_count()} cores (load average {load:.1f}), torch {torch.__version__}, "
            f"NumPy {np.__version__}; median of warm alternating rounds; no environment "
            f"variable set",
            f"{'row':<20}{'workload':<34}{'shape':<15}{'reference':<17}{'LeZero':>10}"
            f"{'ref':>10}{'ratio':>7}{'must':>6}{'aim':>6}"]


def run_rows(rows, shapes, quick):
    """Print one line per row and shape; returns the number of "must" misses."""
    print(*header(), sep="\n", flush=True)
    misses = 0
    for row in rows:
        for name in shapes:
            shape = row.shapes[SHAPE_NAMES.index(name)]
            ratio, ours, ref = measure(row, shape, quick)
            mark = "ok" if ratio <= row.must else "MISS"
            misses += mark == "MISS" and name != "tiny"
            print(f"{row.key:<20}{row.title:<34}{shape_text(shape):<15}{row.reference:<17}"
                  f"{_seconds(ours):>10}{_seconds(ref):>10}{ratio:>7.2f}{row.must:>6g}"
                  f"{row.aim:>6g} {mark}", flush=True)
    return misses


def parse(argv):
    """(row words, shape names, quick, list only) from the command line."""
    args, shapes = list(argv), ["first", "second"]
    if "-h" in args or "--help" in args:
        print(__doc__)
        raise SystemExit(0)
    if "--shape" in args:
        i = args.index("--shape")
        if i + 1 >= len(args) or args[i + 1] not in SHAPE_NAMES:
            raise SystemExit(f"bench_real: --shape takes one of {', '.join(SHAPE_NAMES)}")
        shapes = [args[i + 1]]
        del args[i:i + 2]
    flags = {a for a in args if a.startswith("--")}
    unknown = flags - {"--quick", "--list"}
    if unknown:
        raise SystemExit(f"bench_real: unknown option(s) {sorted(unknown)}")
    words = [a.lower() for a in args if not a.startswith("--")]
    return words, shapes, "--quick" in flags, "--list" in flags


def main(argv=None):
    words, shapes, quick, list_only = parse(sys.argv[1:] if argv is None else argv)
    rows = choose(words)
    if list_only:
        for r in rows:
            print(f"{r.key:<20}{r.title} against {r.reference}")
        return 0
    import lezero  # noqa: F401  (its runtime settings apply first, as for a user)
    warnings.filterwarnings("ignore", message="torchvision .* does not match torch")
    _LIMITS.append(limit_threads(THREADS))
    run_rows(rows, shapes, quick)
    return 0


if __name__ == "__main__":
    run_main(main)
