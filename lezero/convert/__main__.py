"""``python -m lezero.convert SRC --model NAME -o OUT``: a PyTorch or safetensors
checkpoint (torchvision or Hugging Face layout) to a LeZero checkpoint.

    python -m lezero.convert resnet50-0676ba61.pth --model resnet50 -o resnet50.npz
    python -m lezero.convert resnet50.pth --model resnet50 --arg num_classes=10 \\
        --allow-mismatch -o resnet50_10.npz      # a fresh 10-class head
    python -m lezero.convert gpt2/ --model gpt2 -o gpt2.safetensors

Exit status 0 when written, 1 when refused (the report says why and which flag would
accept it), 2 for bad usage.
"""
import argparse
import ast
import pickle
import sys

from lezero.convert import ConversionError, convert, write_report


def _kwarg(text):
    key, sep, value = text.partition("=")
    if not sep or not key.isidentifier():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:
        return key, ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return key, value                   # a bare word stays a string


def _parser():
    p = argparse.ArgumentParser(prog="python -m lezero.convert", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("src", help=".pt/.pth/.bin, .safetensors, or a Hugging Face model folder")
    p.add_argument("--model", required=True, help="a name from lezero.nn.models.list_models()")
    p.add_argument("-o", "--out", required=True, help="output file (.npz, .safetensors, .h5)")
    p.add_argument("--arg", dest="kwargs", action="append", type=_kwarg, default=[],
                   metavar="KEY=VALUE", help="a constructor argument (repeatable)")
    p.add_argument("--key", help="'/'-separated path of the state_dict inside the checkpoint")
    p.add_argument("--non-strict", action="store_true",
                   help="accept missing (kept as initialised) and unexpected (dropped) keys")
    p.add_argument("--allow-mismatch", action="store_true",
                   help="accept shape mismatches (those tensors keep the initialisation)")
    p.add_argument("--report", metavar="FILE.json", help="also write the report as JSON")
    return p


def main(argv=None):
    args = _parser().parse_args(argv)
    try:
        report = convert(args.src, args.model, args.out, dict(args.kwargs),
                         strict=not args.non_strict, allow_mismatch=args.allow_mismatch,
                         key=args.key)
    except ConversionError as e:
        if e.report is not None:
            print(e.report.summary())
            print("\n".join(e.report.details()))
            if args.report:
                write_report(e.report, args.report)
        print(f"refused: {e}", file=sys.stderr)
        return 1
    except (ValueError, TypeError, OSError, pickle.UnpicklingError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(report.summary())
    for line in report.details():
        print(line)
    if args.report:
        write_report(report, args.report)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
