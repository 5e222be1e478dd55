"""The outermost ASGI layer: every request ends in a JSON answer, never in uvicorn's
plain-text 500 or a logged traceback.

* A request cancelled because the server gave up waiting at shutdown (``limits.
  abandoning``) is answered ``503 {"error": "the server stopped before ..."}``.
* An exception that escapes the application before a response started is logged once
  and answered with a JSON 500; one escaping after the response started (Starlette's
  error handler already answered and logged it) is not logged again.
"""
import asyncio
import json
import logging

__all__ = ["guard"]

_log = logging.getLogger("lezero.serving")


async def _answer(send, status, message):
    """Send a JSON error answer; False when a response had already started (the
    server refuses a second start), so nothing more can be said."""
    body = json.dumps({"error": message}).encode()
    try:
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(body)).encode()),
                                (b"connection", b"close")]})
    except RuntimeError:
        return False
    await send({"type": "http.response.body", "body": body})
    return True


def guard(app, limits):
    """``app`` wrapped as the module docstring says; ``limits`` is the server's
    ``connections.Limits`` (read for ``abandoning``)."""

    async def guarded(scope, receive, send):
        if scope["type"] != "http":
            return await app(scope, receive, send)
        try:
            await app(scope, receive, send)
        except asyncio.CancelledError:
            if not limits.abandoning:
                raise
            await _answer(send, 503, "the server stopped before this request was answered "
                                     "(shutdown timeout); try again")
        except Exception as exc:           # noqa: BLE001 -- the last resort
            if await _answer(send, 500, f"internal server error: {type(exc).__name__}"):
                _log.error("serving: unhandled %s on %s: %s", type(exc).__name__,
                           scope.get("path"), exc)
    return guarded
