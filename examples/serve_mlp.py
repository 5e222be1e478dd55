"""Train an MLP on the handwritten digits (or load one) and serve it over KServe v2.

    python examples/serve_mlp.py                    # train (seconds), serve on :8000 until Ctrl-C
    python examples/train_mlp.py && python examples/serve_mlp.py --weights runs/mlp/model.npz
    python examples/serve_mlp.py --serve-seconds 60
    python examples/serve_client.py --url http://127.0.0.1:8000    # from another shell

The weights are served the way ``python -m lezero.serving`` serves a checkpoint (the
script prints that command), with dynamic batching.  Before it settles down to serve,
the script classifies the test digits through its own server, one request per image
from many client threads (tritonclient, the KServe v2 client), and reports the accuracy
and latency.  What it trains goes to ``runs/serve_mlp`` (``--out``), never over
``train_mlp.py``'s ``runs/mlp``; ``--smoke`` trains 3 batches into
``runs/serve_mlp-smoke``, answers a few requests and stops.  Needs the serve extra
(``pip install -e ".[serve]"``, or ``make install``).
"""
import os
import time

from _common import write_summary  # first: puts this checkout's lezero on the path
from _classify import classifier_parser, run_classifier
from _serving import (add_serving_flags, check_through_server, command_line, model_options,
                      parse, report)
from lezero import serving
from lezero.nn.models import MLP


def main():
    p = classifier_parser("serve_mlp", __doc__, epochs=10, batch_size=64, lr=0.05,
                          image_size=8, channels=1)
    add_serving_flags(p, "serve_mlp")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on")
    p.add_argument("--serve-seconds", type=float, default=0,
                   help="stop after this long (0: serve until Ctrl-C)")
    args = parse(p)
    start = time.perf_counter()
    path = args.weights
    if path is None:
        run_classifier(p, lambda a, classes: MLP(64, a.hidden + [classes], flatten=True))
        path = os.path.join(args.out, "model.npz")
    served = serving.load_model(path, **model_options(args))
    with serving.Server({"digits": served}, host=args.host, port=args.port) as server:
        print(f"serving digits at {server.url}; the same from the command line:\n  "
              f"{command_line(path, args)}")
        acc, seconds, latencies = check_through_server(server.url, "digits", args,
                                                       limit=8 if args.smoke else None)
        report(acc, seconds, latencies)
        stats = served.batcher.stats()
        print(f"{stats['batches']} batches, mean size {stats['mean_batch_size']:.1f}, "
              f"sent because {stats['reasons']}")
        write_summary(args, "mlp", "serving", "digits", "served_test_acc", acc,
                      time.perf_counter() - start, requests=len(latencies),
                      requests_per_s=round(len(latencies) / seconds, 1))
        if not args.smoke:
            wait(server, args.serve_seconds)
    print("stopped")


def wait(server, seconds):
    """Serve until Ctrl-C (or for ``seconds``); the context manager then stops it."""
    print("serving; Ctrl-C stops" if not seconds else f"serving for {seconds:g} s", flush=True)
    deadline = time.monotonic() + seconds if seconds else None
    try:
        while server.running and (deadline is None or time.monotonic() < deadline):
            time.sleep(0.2)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
