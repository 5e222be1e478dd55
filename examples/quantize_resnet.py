"""ResNet-18 (32x32 input) made quantizable (residual additions as FloatFunctional),
trained on digits upscaled to 32x32 (or CIFAR-10), then INT8 by PTQ and by QAT.

    python examples/quantize_resnet.py                     # base width 16: minutes
    python examples/quantize_resnet.py --base-width 64 --data cifar10 --download
    python examples/quantize_resnet.py --smoke

See docs/quantization.md for the INT8 speed of this model against float32 and
onnxruntime (benchmarks/bench_quant.py).
"""
import time

from _classify import load_data
from _common import check_args, make_parser, thread_limit
from _quant import add_quant_flags, quantize_and_report, train


def main():
    p = add_quant_flags(make_parser("quantize_resnet", __doc__, epochs=3, batch_size=64,
                                    lr=3e-3), qat_epochs=1)
    p.add_argument("--data", choices=("digits", "cifar10"), default="digits")
    p.add_argument("--download", action="store_true", help="download CIFAR-10 if missing")
    p.add_argument("--base-width", type=int, default=16, help="64 is ResNet-18's own")
    p.add_argument("--limit", type=int, default=None, help="train on the first N images")
    p.set_defaults(image_size=32, channels=3)
    args = check_args(p, p.parse_args())
    import lezero as lz
    from lezero import nn
    from lezero.quantization.models import quantizable_resnet
    lz.manual_seed(args.seed)
    if args.smoke:                        # a quick proof that the script works
        args.limit = args.limit or 3 * args.batch_size
        args.base_width = min(args.base_width, 8)
    train_data, test = load_data(args)
    if args.smoke:
        test = tuple(a[:64] for a in test)
    model = nn.models.get_model("resnet18", num_classes=10, small_input=True,
                                base_width=args.base_width)
    t0 = time.perf_counter()
    with thread_limit(args.threads):
        train(model, train_data, args, args.epochs, args.lr, "float32")
        print(f"trained ResNet-18 (base width {args.base_width}, "
              f"{model.num_parameters():,} parameters) in {time.perf_counter() - t0:.1f} s")
        quantize_and_report(args, model, quantizable_resnet, train_data, test,
                            "resnet18", args.data)


if __name__ == "__main__":
    main()
