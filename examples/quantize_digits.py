"""LeNet-5 on scikit-learn's digits, then INT8: post-training quantization and
quantization-aware training, with the accuracies and sizes of all three.

    python examples/quantize_digits.py                  # a minute on a laptop core
    python examples/quantize_digits.py --observer histogram --qat-epochs 4
    python examples/quantize_digits.py --smoke          # the test suite's quick run

The INT8 model (OUT/int8.npz) runs uint8 x int8 -> int32 Numba kernels; see
docs/quantization.md.
"""
import time

from _common import check_args, digits, make_parser, thread_limit
from _quant import add_quant_flags, quantize_and_report, train


def main():
    p = add_quant_flags(make_parser("quantize_digits", __doc__, epochs=12, batch_size=64,
                                    lr=1e-2), qat_epochs=3)
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
        quantize_and_report(args, model, Q.QuantWrapper, train_data, test, "lenet5",
                            "digits")


if __name__ == "__main__":
    main()
