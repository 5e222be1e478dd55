"""The ASGI application: KServe v2 / Open Inference Protocol REST endpoints on Starlette.

==========================================================  ================================
``GET  /v2``                                                server metadata
``GET  /v2/health/live``, ``/v2/health/ready``              200, or 503 once shutting down
``GET  /v2/models/{name}[/versions/{v}]``                   model metadata
``GET  /v2/models/{name}[/versions/{v}]/ready``             model readiness
``GET  /v2/models/{name}[/versions/{v}]/config``            batching settings (Triton's)
``POST /v2/models/{name}[/versions/{v}]/infer``             inference
``POST /v2/repository/index``                               the models served
``GET  /metrics``                                           Prometheus text
==========================================================  ================================

Every error is ``{"error": "..."}`` with a 4xx/5xx status: 400 for a malformed request
(JSON, shapes, datatypes, names, or a ValueError/TypeError the model raised on the
input), 404 for an unknown model, route or version, 413 for a body over the limit, 415
for an unknown ``Content-Encoding``, 503 when the queue is full (with ``Retry-After``)
or the server is shutting down, 504 when a request timed out in the queue, 500 when the
model failed otherwise, 408 for a body that did not arrive within ``body_timeout``
(the connection guard adds 408 and 431 for headers, see ``connections``).
Nothing a client sends escapes as an unhandled exception (``guard`` is the last
resort), and every JSON body is strict JSON (ASCII, no NaN).
"""
import json
import logging
import math
import time

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from lezero.serving.bodies import read_body
from lezero.serving.errors import QueueFullError, ServingError
from lezero.serving.protocol import ProtocolError, encode_infer_response, parse_infer_request

__all__ = ["AppState", "create_app"]

_log = logging.getLogger("lezero.serving")


class AppState:
    """What the handlers share: the models by name, the metrics and the limits."""

    def __init__(self, models, metrics, max_body_bytes, server_name="lezero",
                 version="0", body_timeout=None):
        self.models, self.metrics = models, metrics
        self.max_body_bytes, self.body_timeout = max_body_bytes, body_timeout
        self.server_name, self.version = server_name, version
        self.ready = True

    def lookup(self, name, version=None):
        served = self.models.get(name)
        if served is None:
            raise ProtocolError(f"unknown model {name!r}; this server serves "
                                f"{sorted(self.models)}", status=404)
        if version not in (None, "", served.version):
            raise ProtocolError(f"model {name!r} has no version {version!r} (it has "
                                f"{served.version!r})", status=404)
        return served

    def model_ready(self, served):
        return self.ready and served.batcher is not None and not served.batcher.closed


class _JSON(JSONResponse):
    """Strict JSON in ASCII: a message with any character (even a lone surrogate from a
    model's error) renders, and no NaN or Infinity is ever sent."""

    def render(self, content):
        return json.dumps(content, allow_nan=False, separators=(",", ":")).encode()


# answers after which the connection is closed: the client may still be sending a body
_CLOSE = {408: {"Connection": "close"}, 413: {"Connection": "close"}}


def _error(message, status, headers=None):
    headers = dict(_CLOSE.get(status, {}), **(headers or {}))
    return _JSON({"error": message}, status_code=status, headers=headers)


def _error_for(exc, name):
    """The response for an exception raised while serving model ``name``."""
    if isinstance(exc, ProtocolError):
        return _error(str(exc), exc.status)
    if isinstance(exc, QueueFullError):
        return _error(str(exc), exc.status, {"Retry-After": "1"})
    if isinstance(exc, ServingError):
        return _error(str(exc), exc.status)
    if isinstance(exc, (ValueError, TypeError)):      # LeZero's checks of the input
        return _error(f"model {name!r} rejected the input: {exc}", 400)
    _log.error("model %r failed: %s: %s", name, type(exc).__name__, exc)
    return _error(f"model {name!r} failed: {type(exc).__name__}: {exc}", 500)


def _request_options(params):
    """Triton's request parameters: ``priority`` (1 is the highest level, 0 or absent
    the default, which ranks with 1) and ``timeout`` (microseconds in the queue)."""
    priority, timeout = params.get("priority", 0), params.get("timeout")
    valid = isinstance(priority, int) and not isinstance(priority, bool)
    if not valid or not 0 <= priority < 2 ** 63:
        raise ProtocolError(f"parameters.priority must be an int >= 0, got "
                            f"{str(priority)[:40]}")
    if timeout is not None and (not isinstance(timeout, (int, float))
                                or isinstance(timeout, bool) or not timeout > 0
                                or not math.isfinite(timeout)):
        raise ProtocolError(f"parameters.timeout must be a positive number of "
                            f"microseconds, got {str(timeout)[:40]}")
    return max(priority - 1, 0), None if timeout is None else timeout / 1000.0


def _select(outputs, request):
    """The requested outputs with their binary flags (all outputs when none named)."""
    default = request.binary_output
    if request.outputs is None:
        return [(name, array, default) for name, array in outputs]
    by_name = dict(outputs)
    chosen = []
    for name, binary in request.outputs:
        if name not in by_name:
            raise ProtocolError(f"unknown output {name!r}; the model has {list(by_name)}")
        chosen.append((name, by_name[name], default if binary is None else bool(binary)))
    return chosen


async def _infer(state, request):
    name = request.path_params["name"]
    served = state.lookup(name, request.path_params.get("version"))
    start = time.perf_counter()
    try:
        if not state.model_ready(served):
            raise ProtocolError(f"model {name!r} is not ready (shutting down)", status=503)
        body = await read_body(request, state.max_body_bytes, state.body_timeout)
        req = parse_infer_request(body, request.headers.get("inference-header-content-length"))
        batcher = served.batcher
        samples = served.split(req.inputs, max_rows=batcher.max_queue_size)
        priority, timeout_ms = _request_options(req.parameters)
        results = await batcher.submit_many_async(samples, priority, timeout_ms)
        outputs = _select(served.join(results), req)
        data, header = encode_infer_response(name, served.version, req.id, outputs)
        headers = {} if header is None else {"Inference-Header-Content-Length": str(header)}
        response = Response(data, headers=headers, media_type="application/json"
                            if header is None else "application/octet-stream")
    except ClientDisconnect:            # nobody to answer; counted as nginx's 499
        response = Response(status_code=499)
    except Exception as exc:            # noqa: BLE001 -- every failure gets an answer
        response = _error_for(exc, name)
    state.metrics.observe_request(name, time.perf_counter() - start, response.status_code)
    return response


async def _live(state, request):
    return _JSON({"live": True})


async def _ready(state, request):
    ok = state.ready and all(state.model_ready(m) for m in state.models.values())
    return _JSON({"ready": ok}, status_code=200 if ok else 503)


async def _server_metadata(state, request):
    return _JSON({"name": state.server_name, "version": state.version,
                  "extensions": ["binary_tensor_data", "model_repository"]})


def _served(state, request):
    name = request.path_params["name"]
    return name, state.lookup(name, request.path_params.get("version"))


async def _model_metadata(state, request):
    name, served = _served(state, request)
    return _JSON(served.metadata(name))


async def _model_ready(state, request):
    name, served = _served(state, request)
    ok = state.model_ready(served)
    return _JSON({"name": name, "ready": ok}, status_code=200 if ok else 503)


async def _model_config(state, request):
    name, served = _served(state, request)
    return _JSON(served.config(name))


async def _repository_index(state, request):
    return _JSON([{"name": n, "version": m.version,
                   "state": "READY" if state.model_ready(m) else "UNAVAILABLE"}
                  for n, m in sorted(state.models.items())])


async def _metrics(state, request):
    queues = {n: (m.batcher.queue_length if m.batcher else 0)
              for n, m in state.models.items()}
    return PlainTextResponse(state.metrics.render(queues),
                             media_type="text/plain; version=0.0.4")


async def _http_error(request, exc):
    return _error(exc.detail, exc.status_code)


async def _server_error(request, exc):
    _log.exception("serving: unhandled error on %s", request.url.path)
    return _error(f"internal server error: {type(exc).__name__}", 500)


def create_app(state):
    """The Starlette application serving ``state``'s models."""

    def route(path, fn, methods=("GET",)):
        async def endpoint(request):
            try:
                return await fn(state, request)
            except ProtocolError as exc:            # unknown model or version
                return _error(str(exc), exc.status)
        return Route(path, endpoint, methods=list(methods))

    routes = []
    for base in ("/v2/models/{name}", "/v2/models/{name}/versions/{version}"):
        routes += [route(base + "/infer", _infer, ["POST"]),    # first: the hot path
                   route(base, _model_metadata), route(base + "/ready", _model_ready),
                   route(base + "/config", _model_config)]
    routes += [route("/v2", _server_metadata), route("/v2/health/live", _live),
               route("/v2/health/ready", _ready),
               route("/v2/repository/index", _repository_index, ["POST"]),
               route("/metrics", _metrics)]
    return Starlette(routes=routes, exception_handlers={HTTPException: _http_error,
                                                        Exception: _server_error})
