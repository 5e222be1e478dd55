"""``python -m lezero.convert SRC --model NAME -o OUT``: a PyTorch or safetensors
checkpoint (torchvision or Hugging Face layout) to a LeZero checkpoint.

    python -m lezero.convert resnet50-0676ba61.pth --model resnet50 -o resnet50.npz
    python -m lezero.convert resnet50.pth --model resnet50 --arg num_classes=10 \\
        --allow-mismatch -o resnet50_10.npz      # a fresh 10-class head
    python -m lezero.convert gpt2/ --model gpt2 -o gpt2.safetensors   # sizes from gpt2/config.json

For the Hugging Face ports (gpt2, bert, llama) a folder's ``config.json`` gives the
constructor arguments (``--arg`` overrides a field); a config field that cannot be mapped
is refused, by name, with status 2.

Exit status (one line on stderr for each failure, never a traceback):

    0  written
    1  refused: shape mismatches, missing or unexpected keys (the report says which flag
       would accept it); nothing is written
    2  bad usage or bad input: a wrong flag, an unknown model or constructor argument, a
       SRC that is missing, unreadable, malformed or unsafe, or holds no state_dict, a
       config.json that cannot be mapped
    3  OUT (or the --report file) could not be written
"""
import argparse
import ast
import sys

from lezero.convert import (ConversionError, constructor_kwargs, convert_state_dict,
                            read_state_dict, write_report)
from lezero.convert.hf_config import config_path

OK, REFUSED, BAD_INPUT, WRITE_FAILED = 0, 1, 2, 3


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


def _one_line(error, name):
    """``error`` as one line that names ``name`` (the file or flag it concerns)."""
    text = " ".join(str(error).split()) or type(error).__name__
    return text if name in text else f"{name}: {type(error).__name__}: {text}"


def _fail(status, message):
    print(f"error: {message}", file=sys.stderr)
    return status


def main(argv=None):
    args = _parser().parse_args(argv)
    from lezero.nn.models import get_model
    from lezero.utils.serialization import SAVE_EXTENSIONS, save
    if not args.out.lower().endswith(SAVE_EXTENSIONS):
        return _fail(BAD_INPUT, f"-o {args.out}: the extension must be one of "
                                f"{', '.join(SAVE_EXTENSIONS)}")
    try:           # anything that goes wrong reading SRC is SRC's fault: one line, status 2
        state = read_state_dict(args.src, args.key)
    except Exception as e:
        return _fail(BAD_INPUT, _one_line(e, args.src))
    config = config_path(args.src, args.model)
    try:
        kwargs = constructor_kwargs(args.src, args.model, dict(args.kwargs))
    except Exception as e:
        return _fail(BAD_INPUT, _one_line(e, config))
    if config:
        print(f"{args.model} configured by {config}" + (" and --arg" if args.kwargs else ""))
    try:
        net = get_model(args.model, **kwargs)
    except Exception as e:
        return _fail(BAD_INPUT, _one_line(e, f"--model {args.model}" +
                                          (f" with {config}" if config else "")))
    try:
        report = convert_state_dict(state, net, strict=not args.non_strict,
                                    allow_mismatch=args.allow_mismatch)
    except ConversionError as e:
        try:
            _show(e.report, args.report)
        except OSError as w:
            return _fail(WRITE_FAILED, _one_line(w, args.report))
        print(f"refused: {e}", file=sys.stderr)
        return REFUSED
    except Exception as e:
        return _fail(BAD_INPUT, _one_line(e, args.src))
    try:
        save(net.state_dict(), args.out)
        _show(report, args.report)
    except Exception as e:
        return _fail(WRITE_FAILED, _one_line(e, args.out))
    print(f"wrote {args.out}")
    return OK


def _show(report, path):
    """Print the report; write it as JSON to ``path`` if given."""
    if report is None:
        return
    print(report.summary())
    for line in report.details():
        print(line)
    if path:
        write_report(report, path)


if __name__ == "__main__":
    sys.exit(main())
