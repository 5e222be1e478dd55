"""Serving: a dynamic batcher and a KServe v2 (Open Inference Protocol) HTTP server.

    from lezero import serving
    with serving.DynamicBatcher(model, max_batch_size=32, max_delay_ms=5.0) as b:
        y = b.submit(x).result()

    with serving.Server({"digits": model}, port=0) as server:   # 127.0.0.1, a free port
        ...  # any KServe v2 client (tritonclient.http, curl) at server.url

    python -m lezero.serving --model digits=model.onnx --port 8000

The batcher needs nothing beyond NumPy; the server imports Starlette and uvicorn (the
``serve`` extra) when it starts.  See docs/serving.md.
"""
from lezero.serving.batcher import DynamicBatcher
from lezero.serving.errors import (BatcherClosedError, QueueFullError, RequestTimeoutError,
                                   ServingError)
from lezero.serving.loaders import load_model, parse_model_arg, register_loader
from lezero.serving.padding import Padding
from lezero.serving.records import BatchRecord
from lezero.serving.model import ServedModel, TensorSpec
from lezero.serving.server import Server

__all__ = ["DynamicBatcher", "Padding", "BatchRecord", "Server", "ServedModel",
           "TensorSpec", "load_model", "parse_model_arg", "register_loader",
           "ServingError", "QueueFullError", "RequestTimeoutError", "BatcherClosedError"]
