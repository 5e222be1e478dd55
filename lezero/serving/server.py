"""``Server``: the KServe v2 application run by uvicorn in a background thread.

    with serving.Server({"digits": model}, port=0) as server:    # port 0: a free one
        print(server.url)                                        # http://127.0.0.1:PORT

``start`` warms each model up, starts its batcher, binds the socket (so a busy port
fails right there, in the caller's thread) and returns once uvicorn accepts
connections.  ``stop`` shuts down gracefully (``shutdown``): readiness turns to 503,
connections already queued are accepted and answered, requests in flight are answered
up to ``shutdown_timeout`` seconds after the stop and the rest get a JSON 503, then every
batcher drains its queue; ``stop`` returns within about the timeout even when a model
call hangs.  Connections are guarded by the timeouts and limits of ``connections``.
"""
import asyncio
import functools
import logging
import os
import re
import socket
import threading
import time

from lezero.serving.connections import Limits, protocol_class
from lezero.serving.metrics import Metrics
from lezero.serving.model import ServedModel
from lezero.utils.checks import check_int, check_number, check_type

__all__ = ["Server"]

_log = logging.getLogger("lezero.serving")
_FD_RESERVE = 32        # descriptors kept free for files, pipes and the model's own use


def _import_stack():
    try:
        import starlette  # noqa: F401
        import uvicorn
    except ImportError:
        raise ImportError("serving.Server needs Starlette and uvicorn: "
                          "pip install -e '.[serve]'") from None
    return uvicorn


def _as_served(name, value):
    if isinstance(value, ServedModel):
        return value
    if isinstance(value, (str, os.PathLike)):
        from lezero.serving.loaders import load_model
        return load_model(value)
    if not callable(value):
        raise TypeError(f"Server: model {name!r} must be a Module, a callable, a "
                        f"ServedModel or a path, got {type(value).__name__}")
    return ServedModel(value)


def _bind(host, port):
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto IPPROTO_TCP (not 0): asyncio sets TCP_NODELAY only on such sockets, and
    # without it a response written in two parts waits ~40 ms for a delayed ACK
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise OSError(f"Server: cannot listen on {host}:{port}: {exc}") from None
    sock.set_inheritable(True)
    return sock


def _connection_limit(requested):
    """``requested``, lowered to fit the descriptors this process may still open (less
    a reserve): past the descriptor limit asyncio stops accepting altogether."""
    try:
        import resource
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, OSError, ValueError):
        return requested
    if soft == resource.RLIM_INFINITY:
        return requested
    try:
        open_now = len(os.listdir("/proc/self/fd"))
    except OSError:
        open_now = 64
    return max(1, min(requested, soft - open_now - _FD_RESERVE))


def _seconds(name, value):
    return check_number("Server", name, value, low=0, low_open=True, high=1e6)


class Server:
    """Serve ``models`` (``{name: Module | callable | ServedModel | path}``) over HTTP
    with the KServe v2 protocol (see ``lezero.serving.app`` for the endpoints).

    The batcher settings apply to every model that does not set its own
    (``ServedModel(..., max_batch_size=...)``).  ``max_body_bytes`` caps a request body
    (413 beyond); ``log_level`` is uvicorn's.  Connections: a request's header must
    arrive within ``header_timeout`` seconds and its body within ``body_timeout`` (408
    beyond; a client that takes nothing of its answer for that long is cut off), an
    idle keep-alive connection is closed after ``keep_alive_timeout``, and at most
    ``max_connections`` are open (lowered to fit the descriptor limit).
    ``shutdown_timeout`` bounds the wait for requests in flight at ``stop``."""

    def __init__(self, models, host="127.0.0.1", port=8000, max_batch_size=32,
                 max_delay_ms=5.0, *, max_queue_size=1024, preferred_batch_sizes=None,
                 timeout_ms=None, max_body_bytes=64 << 20, shutdown_timeout=10.0,
                 header_timeout=10.0, body_timeout=60.0, keep_alive_timeout=5.0,
                 max_connections=1024, log_level="warning"):
        check_type("Server", "models", models, dict, "a dict {name: model}")
        if not models:
            raise ValueError("Server: models is empty; give at least one {name: model}")
        for name in models:
            if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
                raise ValueError(f"Server: model names may use letters, digits, '_', '.' "
                                 f"and '-', got {name!r}")
        self.models = {name: _as_served(name, value) for name, value in models.items()}
        self.host = check_type("Server", "host", host, str)
        self._requested_port = check_int("Server", "port", port, low=0, high=65535)
        self.batcher_defaults = dict(
            max_batch_size=check_int("Server", "max_batch_size", max_batch_size, low=1),
            max_delay_ms=check_number("Server", "max_delay_ms", max_delay_ms, low=0),
            max_queue_size=check_int("Server", "max_queue_size", max_queue_size, low=1),
            preferred_batch_sizes=preferred_batch_sizes, timeout_ms=timeout_ms)
        self.max_body_bytes = check_int("Server", "max_body_bytes", max_body_bytes, low=1)
        self.shutdown_timeout = check_number("Server", "shutdown_timeout", shutdown_timeout,
                                             low=0, high=1e6)
        self.body_timeout = _seconds("body_timeout", body_timeout)
        self.keep_alive_timeout = _seconds("keep_alive_timeout", keep_alive_timeout)
        self.limits = Limits(header_timeout=_seconds("header_timeout", header_timeout),
                             send_timeout=self.body_timeout,
                             max_connections=check_int("Server", "max_connections",
                                                       max_connections, low=1))
        self.log_level = check_type("Server", "log_level", log_level, str)
        self.metrics = Metrics(self.models)
        self._uvicorn = self._thread = self._socket = self._state = None
        self._error = None
        self.port = None

    # ----- starting ------------------------------------------------------------------
    def start(self, timeout=30.0):
        """Start serving; returns self once connections are accepted."""
        if self._thread is not None:
            raise RuntimeError("Server: already started")
        uvicorn = _import_stack()
        try:
            for name, served in self.models.items():
                served.start(name, on_batch=functools.partial(self.metrics.observe_batch,
                                                              name), **self.batcher_defaults)
            self._socket = _bind(self.host, self._requested_port)
            self.port = self._socket.getsockname()[1]
            self._uvicorn = self._make_uvicorn(uvicorn)
            self._thread = threading.Thread(target=self._serve, name="lezero-server",
                                            daemon=True)
            self._thread.start()
            self._wait_started(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _make_uvicorn(self, uvicorn):
        from lezero import __version__
        from lezero.serving.app import AppState, create_app
        from lezero.serving.guard import guard
        from lezero.serving.shutdown import uvicorn_server
        self.limits.stopping = self.limits.abandoning = False
        self.limits.max_connections = _connection_limit(self.limits.max_connections)
        self._state = AppState(self.models, self.metrics, self.max_body_bytes,
                               version=__version__, body_timeout=self.body_timeout)
        config = uvicorn.Config(guard(create_app(self._state), self.limits),
                                http=protocol_class(self.limits), ws="none",
                                log_level=self.log_level, log_config=None, access_log=False,
                                lifespan="off", timeout_keep_alive=self.keep_alive_timeout)
        return uvicorn_server(config, self.limits, self.shutdown_timeout)

    def _serve(self):
        try:
            asyncio.run(self._uvicorn.serve(sockets=[self._socket]))
        except BaseException as exc:     # noqa: BLE001 -- reported by start/stop
            self._error = exc

    def _wait_started(self, timeout):
        deadline = time.monotonic() + timeout
        while not self._uvicorn.started:
            if not self._thread.is_alive():
                raise RuntimeError(f"Server: uvicorn stopped while starting: {self._error!r}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"Server: not accepting connections after {timeout} s")
            time.sleep(0.005)

    # ----- stopping ------------------------------------------------------------------
    def stop(self, timeout=None):
        """Graceful shutdown (see the module docstring), waiting at most ``timeout``
        seconds (default ``shutdown_timeout``) for requests in flight; returns within
        about that even when a model call hangs.  Safe to call twice."""
        timeout = self.shutdown_timeout if timeout is None else check_number(
            "Server.stop", "timeout", timeout, low=0, high=1e6)
        deadline = time.monotonic() + timeout
        if self._state is not None:
            self._state.ready = False
        if self._uvicorn is not None:
            self._uvicorn.shutdown_timeout = timeout
            self._uvicorn.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout + 2.0)     # + uvicorn's tick and the last answers
        for name, served in self.models.items():
            served.stop(drain=True, timeout=max(deadline - time.monotonic(), 0.05))
            if served.batcher is not None and served.batcher.running:
                _log.warning("Server.stop: model %r is still running after %g s; its "
                             "worker thread is left to finish on its own", name, timeout)
        if self._socket is not None:
            self._socket.close()
        self._uvicorn = self._thread = self._socket = None

    @property
    def running(self):
        return self._thread is not None and self._thread.is_alive()

    @property
    def error(self):
        """The exception that stopped the server thread, if any."""
        return self._error

    @property
    def url(self):
        """``http://host:port`` once started."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return None if self.port is None else f"http://{host}:{self.port}"

    def wait(self):
        """Block until the server stops (the command line's foreground loop)."""
        while self.running:
            self._thread.join(0.5)

    def __enter__(self):
        return self if self._thread is not None else self.start()

    def __exit__(self, *exc):
        self.stop()

    def __repr__(self):
        where = self.url or f"{self.host}:{self._requested_port} (not started)"
        return f"Server({sorted(self.models)}, {where})"
