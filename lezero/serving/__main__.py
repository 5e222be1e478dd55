"""Serve models from files over KServe v2 until interrupted.

    python -m lezero.serving --model digits=model.onnx --port 8000
    python -m lezero.serving \\
        --model digits=runs/mlp/model.npz:model=mlp:in_channels=64:hidden_channels=[128,64,10]:flatten=True:shape=[64]

A model is ``NAME=PATH[:key=value]...`` (see ``lezero.serving.loaders``); give
``--model`` once per model.  Ctrl-C (or SIGTERM) shuts down gracefully: requests in
flight are answered and the queues drained.
"""
import argparse
import signal
import sys
import threading


def build_parser():
    p = argparse.ArgumentParser(prog="python -m lezero.serving", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", action="append", required=True, metavar="NAME=PATH[:k=v]",
                   help="a model to serve (repeat for several)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default: loopback only)")
    p.add_argument("--port", type=int, default=8000, help="0 picks a free port")
    p.add_argument("--max-batch-size", type=int, default=32)
    p.add_argument("--max-delay-ms", type=float, default=5.0)
    p.add_argument("--max-queue-size", type=int, default=1024)
    p.add_argument("--timeout-ms", type=float, default=None,
                   help="default time a request may wait in the queue")
    p.add_argument("--max-body-mb", type=float, default=64.0,
                   help="largest request body accepted (413 beyond)")
    p.add_argument("--log-level", default="warning", help="uvicorn's log level")
    return p


def main(argv=None):
    from lezero.serving import Server, load_model, parse_model_arg
    args = build_parser().parse_args(argv)
    models = {}
    try:
        for text in args.model:
            name, path, options = parse_model_arg(text)
            if name in models:
                raise ValueError(f"--model: the name {name!r} is given twice")
            models[name] = load_model(path, **options)
        server = Server(models, host=args.host, port=args.port,
                        max_batch_size=args.max_batch_size, max_delay_ms=args.max_delay_ms,
                        max_queue_size=args.max_queue_size, timeout_ms=args.timeout_ms,
                        max_body_bytes=int(args.max_body_mb * 2 ** 20),
                        log_level=args.log_level)
        server.start()
    except (ValueError, TypeError, OSError, ImportError) as exc:
        print(f"python -m lezero.serving: {exc}", file=sys.stderr)
        return 2
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    print(f"serving {', '.join(sorted(models))} at {server.url} (KServe v2; "
          f"metrics at {server.url}/metrics); Ctrl-C stops", flush=True)
    while not stop.wait(0.5) and server.running:
        pass
    server.stop()
    print("stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
