"""The server's guard on HTTP connections: timeouts, a connection limit and JSON errors.

uvicorn (0.55) closes a connection that stays idle after a response
(``timeout_keep_alive``) but never one that connects and sends nothing, or half a
header, so a few hundred silent clients used up the process's file descriptors and a
good request found no room.  ``protocol_class(limits)`` subclasses uvicorn's HTTP
protocol (httptools or h11, whichever uvicorn picked) with:

* a **header timeout**: a request's header must be complete within ``header_timeout``
  seconds of the connection opening or of the previous response's end; else the
  connection is closed (after a JSON 408 when part of a header came);
* a **header size limit**: more than ``max_header_bytes`` without a complete header is
  answered with a JSON 431 and closed;
* a **send timeout**: a client that takes nothing of its answer for ``send_timeout``
  seconds while the answer waits in the write buffer is disconnected (``abort``: a
  plain ``close`` waits for the buffer to drain, so a client that never reads held
  the connection and the answer's memory for ever);
* a **connection limit**: past ``max_connections`` open connections the one idle the
  longest (no request in progress) is closed to make room; when every connection has a
  request in progress the new one is answered with a JSON 503 and closed;
* JSON error bodies where uvicorn answers malformed HTTP with plain text;
* a **graceful stop** that never drops a request already sent: an idle connection is
  closed only after ``grace`` seconds without a request starting (a request sent before
  ``stop()`` is on its way), and every connection closes after its response.
"""
import dataclasses
import json
import time

__all__ = ["Limits", "protocol_class", "error_response"]

_REASONS = {400: "Bad Request", 408: "Request Timeout", 431:
            "Request Header Fields Too Large", 503: "Service Unavailable"}


@dataclasses.dataclass
class Limits:
    """The connection settings the protocol reads (``stopping`` is set by the server's
    shutdown; ``abandoning`` once it stops waiting for the requests in flight)."""

    header_timeout: float = 10.0
    send_timeout: float = 60.0
    max_header_bytes: int = 64 << 10
    max_connections: int = 1024
    grace: float = 0.25
    stopping: bool = False
    abandoning: bool = False


def error_response(status, message):
    """A complete HTTP/1.1 response with a JSON ``{"error": message}`` body that closes
    the connection (for answers written outside the application)."""
    body = json.dumps({"error": message}).encode()
    head = (f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\n"
            "content-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n")
    return head.encode("ascii") + body


class _Guard:
    """Mixed in before uvicorn's protocol class (see the module docstring)."""

    limits = None                       # a Limits, set by protocol_class

    # ----- life cycle ----------------------------------------------------------------
    def connection_made(self, transport):
        super().connection_made(transport)
        self._timer, self._header_bytes, self._idle_since = None, 0, time.monotonic()
        self._write_timer = None
        self._arm(self.limits.grace if self.limits.stopping else self.limits.header_timeout)
        if len(self.connections) > self.limits.max_connections:
            self._make_room()

    def connection_lost(self, exc):
        self._disarm()
        self.resume_writing()
        super().connection_lost(exc)

    def pause_writing(self):
        super().pause_writing()
        if self._write_timer is None:
            self._write_timer = self.loop.call_later(self.limits.send_timeout,
                                                     self.transport.abort)

    def resume_writing(self):
        super().resume_writing()
        if getattr(self, "_write_timer", None) is not None:
            self._write_timer.cancel()
            self._write_timer = None

    def data_received(self, data):
        super().data_received(data)
        if not self._idle():                # a request's header is complete
            self._disarm()
            self._header_bytes = 0
            return
        if self.cycle is not None and self.cycle.more_body:
            return                          # the rest of a body nobody reads
        self._header_bytes += len(data)
        if self._header_bytes > self.limits.max_header_bytes:
            self._refuse(431, f"the request header is over {self.limits.max_header_bytes} "
                              "bytes")

    def on_response_complete(self):
        super().on_response_complete()
        if self.transport.is_closing() or not self._idle():
            return
        if self.limits.stopping:            # stopping: one answer per connection
            self.transport.close()
            return
        self._header_bytes, self._idle_since = 0, time.monotonic()
        self._arm(self.limits.header_timeout)

    def shutdown(self):
        """The server is stopping: a connection with a request in progress closes after
        its response; an idle one waits ``grace`` seconds for a request already sent."""
        if not self._idle():
            super().shutdown()
        elif not self.transport.is_closing():
            self._arm(self.limits.grace)

    def send_400_response(self, msg):
        self._refuse(400, f"malformed HTTP request: {msg}")

    # ----- helpers -------------------------------------------------------------------
    def _idle(self):
        return self.cycle is None or self.cycle.response_complete

    def _arm(self, delay):
        self._disarm()
        self._timer = self.loop.call_later(delay, self._expired)

    def _disarm(self):
        if getattr(self, "_timer", None) is not None:
            self._timer.cancel()
            self._timer = None

    def _expired(self):
        self._timer = None
        if not self._idle() or self.transport.is_closing():
            return
        if self._header_bytes and not self.limits.stopping:
            self._refuse(408, f"no complete request header within "
                              f"{self.limits.header_timeout:g} s")
        else:
            self.transport.close()

    def _refuse(self, status, message):
        self._disarm()
        if not self.transport.is_closing():
            self.transport.write(error_response(status, message))
            self.transport.close()

    def _make_room(self):
        """Over the limit: close the longest-idle other connection, or refuse this one."""
        idle = [c for c in self.connections
                if c is not self and isinstance(c, _Guard) and c._idle()
                and not c.transport.is_closing()]
        if idle:
            min(idle, key=lambda c: c._idle_since).transport.close()
        else:
            self._refuse(503, f"the server is at its limit of "
                              f"{self.limits.max_connections} connections, each with a "
                              "request in progress; try again later")


def protocol_class(limits, base=None):
    """uvicorn's HTTP protocol class (``base``, default the one uvicorn would pick) with
    the guard of the module docstring, reading ``limits``."""
    if base is None:
        from uvicorn.protocols.http.auto import AutoHTTPProtocol
        base = AutoHTTPProtocol
    return type(f"Guarded{base.__name__}", (_Guard, base), {"limits": limits})
