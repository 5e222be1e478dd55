"""Classify the test digits through a KServe v2 server, with tritonclient.

    python examples/serve_mlp.py &                              # a server on :8000
    python examples/serve_client.py --url http://127.0.0.1:8000
    python examples/serve_client.py --weights runs/mlp/model.npz   # its own server

The client is Triton's (``tritonclient.http``): it asks whether the server is live,
reads the model's metadata, sends one request holding four images, then one request
per test image from ``--concurrency`` threads, and reports accuracy and latency.
Without ``--url`` it starts a server of its own in this process, serving
``--weights`` (or, without one, an untrained MLP: about 10% accuracy).
``--smoke`` uses its own server and a few requests.  Needs the serve extra
(``pip install -e ".[serve]"``, or ``make install``).
"""
import contextlib
import os
import time

from _common import digits, make_parser, write_summary  # first: this checkout's lezero
from _serving import (add_serving_flags, check_through_server, model_options, parse,
                      report)


def own_server(args):
    """A server in this process: the checkpoint's weights, or an untrained MLP."""
    import lezero as lz
    from lezero import serving
    from lezero.nn.models import MLP
    if args.weights:
        served = serving.load_model(args.weights, **model_options(args))
    else:
        lz.manual_seed(args.seed)
        print("no --url and no --weights: serving an untrained MLP")
        served = serving.ServedModel(MLP(64, args.hidden + [10], flatten=True),
                                     inputs=[("input__0", "FP32", [1, 8, 8])],
                                     max_batch_size=args.max_batch_size,
                                     max_delay_ms=args.max_delay_ms)
    return serving.Server({args.model: served}, port=args.port)


def main():
    p = make_parser("serve_client", __doc__, epochs=1, batch_size=1, lr=1.0)
    add_serving_flags(p, "serve_client")
    p.add_argument("--url", help="a running server (default: start one here)")
    p.add_argument("--model", default="digits", help="the model's name on the server")
    args = parse(p)
    if args.smoke:
        args.url = None
    start = time.perf_counter()
    import tritonclient.http as th
    with contextlib.ExitStack() as stack:
        url = args.url or stack.enter_context(own_server(args)).url
        client = th.InferenceServerClient(url.split("://", 1)[-1])
        print(f"server at {url}: live {client.is_server_live()}, "
              f"model {args.model!r} ready {client.is_model_ready(args.model)}")
        meta = client.get_model_metadata(args.model)
        print("inputs:", meta["inputs"], "outputs:", meta["outputs"])
        images, labels = digits(False)
        inp = th.InferInput(meta["inputs"][0]["name"], [4, 1, 8, 8], "FP32")
        inp.set_data_from_numpy(images[:4])
        out = client.infer(args.model, [inp]).as_numpy(meta["outputs"][0]["name"])
        print(f"one request of 4 images: predicted {out.argmax(axis=1).tolist()}, "
              f"labels {labels[:4].tolist()}")
        acc, seconds, latencies = check_through_server(url, args.model, args,
                                                       limit=8 if args.smoke else None)
        report(acc, seconds, latencies)
        client.close()
    os.makedirs(args.out, exist_ok=True)
    write_summary(args, "mlp", "serving client", "digits", "served_test_acc", acc,
                  time.perf_counter() - start, requests=len(latencies))


if __name__ == "__main__":
    main()
