"""Serve models from files over KServe v2 until interrupted.

    python -m lezero.serving --model digits=model.onnx --port 8000
    python -m lezero.serving \\
        --model digits=runs/mlp/model.npz:model=mlp:in_channels=64:hidden_channels=[128,64,10]:flatten=True:shape=[64]

A model is ``NAME=PATH[:key=value]...`` (see ``lezero.serving.loaders``); give
``--model`` once per model.  Ctrl-C (or SIGTERM) shuts down gracefully: requests in
flight are answered and the queues drained.

Exit status: 0 after a requested stop; 2 with one line on stderr when it cannot start
(a bad option, a model file that is missing, of an unknown kind or that does not load,
a port it cannot listen on); 1 with one line when the server fails while serving;
130 when interrupted while loading.
"""
import argparse
import math
import signal
import sys
import threading

PROG = "python -m lezero.serving"


class _Parser(argparse.ArgumentParser):
    """argparse, but a bad option is one line (and status 2), not the usage text."""

    def error(self, message):
        self.exit(2, f"{PROG}: {message} (see --help)\n")


def _positive(text):
    value = float(text)
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}")
    return value


def build_parser():
    p = _Parser(prog=PROG, description=__doc__,
                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", action="append", required=True, metavar="NAME=PATH[:k=v]",
                   help="a model to serve (repeat for several)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default: loopback only)")
    p.add_argument("--port", type=int, default=8000, help="0 picks a free port")
    p.add_argument("--max-batch-size", type=int, default=32)
    p.add_argument("--max-delay-ms", type=float, default=5.0)
    p.add_argument("--max-queue-size", type=int, default=1024)
    p.add_argument("--timeout-ms", type=_positive, default=None,
                   help="default time a request may wait in the queue")
    p.add_argument("--max-body-mb", type=_positive, default=64.0,
                   help="largest request body accepted (413 beyond)")
    p.add_argument("--header-timeout", type=_positive, default=10.0,
                   help="seconds for a request's header to arrive (default 10)")
    p.add_argument("--body-timeout", type=_positive, default=60.0,
                   help="seconds for a request's body to arrive (408 beyond; default 60)")
    p.add_argument("--keep-alive-timeout", type=_positive, default=5.0,
                   help="seconds an idle keep-alive connection stays open (default 5)")
    p.add_argument("--max-connections", type=int, default=1024,
                   help="open connections at most (default 1024, lowered to fit the "
                        "descriptor limit)")
    p.add_argument("--shutdown-timeout", type=float, default=10.0,
                   help="seconds a stop waits for requests in flight (default 10)")
    p.add_argument("--log-level", default="warning", help="uvicorn's log level")
    return p


def _one_line(exc):
    """An exception as one line: its message (its type's name when that says more)."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    if not isinstance(exc, (ValueError, TypeError, OSError, ImportError)):
        text = f"{type(exc).__name__}: {text}"
    return text


def _load_models(specs):
    from lezero.serving import load_model, parse_model_arg
    models = {}
    for text in specs:
        name, path, options = parse_model_arg(text)
        if name in models:
            raise ValueError(f"--model: the name {name!r} is given twice")
        try:
            models[name] = load_model(path, **options)
        except Exception as exc:          # noqa: BLE001 -- reported in one line
            raise ValueError(f"--model {name}: cannot load {path}: {_one_line(exc)}") \
                from None
    return models


def _start(args):
    from lezero.serving import Server
    models = _load_models(args.model)
    server = Server(models, host=args.host, port=args.port,
                    max_batch_size=args.max_batch_size, max_delay_ms=args.max_delay_ms,
                    max_queue_size=args.max_queue_size, timeout_ms=args.timeout_ms,
                    max_body_bytes=max(1, int(args.max_body_mb * 2 ** 20)),
                    header_timeout=args.header_timeout, body_timeout=args.body_timeout,
                    keep_alive_timeout=args.keep_alive_timeout,
                    max_connections=args.max_connections,
                    shutdown_timeout=args.shutdown_timeout, log_level=args.log_level)
    return models, server.start()


def main(argv=None):
    args = build_parser().parse_args(argv)
    try:
        models, server = _start(args)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted while starting", file=sys.stderr)
        return 130
    except Exception as exc:              # noqa: BLE001 -- one line, never a traceback
        print(f"{PROG}: {_one_line(exc)}", file=sys.stderr)
        return 2
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    print(f"serving {', '.join(sorted(models))} at {server.url} (KServe v2; "
          f"metrics at {server.url}/metrics); Ctrl-C stops", flush=True)
    while not stop.wait(0.5) and server.running:
        pass
    failed = not stop.is_set()
    server.stop()
    if failed:
        print(f"{PROG}: the server stopped on its own: {server.error!r}", file=sys.stderr)
        return 1
    print("stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
