"""What the serving examples share: the digits MLP (trained here or loaded from a
checkpoint) as a served model, and a KServe v2 client check of it with tritonclient."""
import concurrent.futures
import threading
import time

import numpy as np

from _common import bar, check_args, digits, require

require("starlette", "uvicorn", "tritonclient.http")     # the serve extra, before any work


def add_serving_flags(p, name):
    """The model's and the server's flags, added to a ``_common.make_parser`` parser."""
    p.prog = f"python examples/{name}.py"
    p.add_argument("--hidden", type=int, nargs="+", default=[128, 64],
                   help="hidden widths of the digits MLP")
    p.add_argument("--weights", help="serve these weights (a model.npz written by "
                                        "examples/train_mlp.py with the same --hidden) "
                                        "instead of training")
    p.add_argument("--port", type=int, default=8000, help="0 picks a free port")
    p.add_argument("--max-batch-size", type=int, default=32)
    p.add_argument("--max-delay-ms", type=float, default=2.0)
    p.add_argument("--concurrency", type=int, default=16,
                   help="client threads for the check through the server")
    return p


def parse(parser):
    args = check_args(parser, parser.parse_args())
    if args.smoke:
        args.port = 0                   # never collide with a real server in the tests
    return args


def model_options(args):
    """``load_model`` options for the digits MLP (the same as the command line's
    ``NAME=PATH:key=value`` list)."""
    return {"model": "mlp", "in_channels": 64, "hidden_channels": args.hidden + [10],
            "flatten": True, "shape": [1, 8, 8], "max_batch_size": args.max_batch_size,
            "max_delay_ms": args.max_delay_ms}


def command_line(path, args):
    """The ``python -m lezero.serving`` command serving the same weights."""
    opts = ":".join(f"{k}={v}".replace(" ", "") for k, v in model_options(args).items())
    return f"python -m lezero.serving --model digits={path}:{opts}"


def check_through_server(url, model, args, limit=None):
    """Classify the test digits with one request per image from ``--concurrency``
    tritonclient threads; returns accuracy, seconds and per-request latencies."""
    import tritonclient.http as th
    images, labels = digits(False)
    n = len(images) if limit is None else min(limit, len(images))
    host = url.split("://", 1)[-1]
    local = threading.local()

    def classify(i):
        if not hasattr(local, "client"):
            local.client = th.InferenceServerClient(host)
        inp = th.InferInput("input__0", [1, 1, 8, 8], "FP32")
        inp.set_data_from_numpy(images[i:i + 1])
        start = time.perf_counter()
        out = local.client.infer(model, [inp], request_id=str(i))
        assert out.get_response()["id"] == str(i)
        return int(out.as_numpy("output__0").argmax()), time.perf_counter() - start

    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(args.concurrency) as pool:
        results = list(bar(pool.map(classify, range(n)), total=n, unit="req",
                           desc=f"requests to {model}"))
    seconds = time.perf_counter() - start
    predicted = np.array([p for p, _ in results])
    return float((predicted == labels[:n]).mean()), seconds, np.array([s for _, s in results])


def report(accuracy, seconds, latencies):
    ms = np.percentile(latencies, [50, 95, 99]) * 1000
    print(f"served test accuracy {accuracy * 100:.2f}% over {len(latencies)} requests "
          f"in {seconds:.2f} s ({len(latencies) / seconds:.0f} req/s; latency p50 "
          f"{ms[0]:.1f} ms, p95 {ms[1]:.1f} ms, p99 {ms[2]:.1f} ms)")
