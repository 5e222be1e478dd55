"""LeNet-5 on scikit-learn's digits, then INT8: post-training quantization and
quantization-aware training, with the accuracies and sizes of all three.

    python examples/quantize_digits.py                  # a minute on a laptop core
    python examples/quantize_digits.py --observer histogram --qat-epochs 4
    python examples/quantize_digits.py --smoke          # the test suite's quick run
    python examples/quantize_digits.py --record         # also docs/figures/quantize_digits.md

The INT8 model (OUT/int8.npz) runs uint8 x int8 -> int32 Numba kernels; see
docs/quantization.md, which shows the result table of the last ``--record`` run.
"""
import datetime
import os
import sys
import time

from _common import check_args, digits, make_parser, thread_limit
from _quant import add_quant_flags, quantize_and_report, train


def record_results(args, results):
    """Save the result table as the figures block ``quantize_digits`` (the docs' copy)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))), "tools"))
    from doc_figures import record
    flags = " ".join(a for a in sys.argv[1:] if a != "--record")
    rows = [("float32", results["float_acc"]), ("PTQ int8", results["ptq_acc"]),
            ("QAT int8", results["qat_acc"])]
    lines = [f"Last output of `python examples/quantize_digits.py{' ' + flags if flags else ''}`"
             f" ({datetime.date.today().isoformat()}, seed {args.seed}, {args.epochs} "
             f"float epochs, {args.qat_epochs} QAT epochs, {args.observer} observers):",
             "", "| model | test accuracy | vs float32 |", "|---|---|---|"]
    for label, acc in rows:
        delta = "" if label == "float32" else f"{(acc - results['float_acc']) * 100:+.2f}"
        lines.append(f"| {label} | {acc * 100:.2f}% | {delta} |")
    lines += ["", f"Size: float32 {results['float_bytes'] / 1024:.1f} KiB, INT8 "
              f"{results['int8_bytes'] / 1024:.1f} KiB ({results['size_ratio']:.3f}x)."]
    record("quantize_digits", "\n".join(lines))


def main():
    p = add_quant_flags(make_parser("quantize_digits", __doc__, epochs=12, batch_size=64,
                                    lr=1e-2), qat_epochs=3)
    p.add_argument("--record", action="store_true",
                   help="save the result table for docs/quantization.md (tools/doc_figures.py)")
    args = check_args(p, p.parse_args())
    import lezero as lz
    from lezero import quantization as Q
    from lezero.nn.models import LeNet5
    lz.manual_seed(args.seed)
    train_data, test = digits(True), digits(False)
    model = LeNet5(10, 1, 8)
    t0 = time.perf_counter()
    with thread_limit(args.threads):
        train(model, train_data, args, args.epochs, args.lr, "float32")
        print(f"trained LeNet-5 ({model.num_parameters():,} parameters) for {args.epochs} "
              f"epochs in {time.perf_counter() - t0:.1f} s")
        results = quantize_and_report(args, model, Q.QuantWrapper, train_data, test,
                                      "lenet5", "digits")
    if args.record and not args.smoke:
        record_results(args, results)


if __name__ == "__main__":
    main()
