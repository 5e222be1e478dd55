"""Reading a request body within its limits: size (also after decompression) and time.

Every limit is checked before the work it bounds: a declared ``Content-Length`` over the
limit is refused (413) before a byte is read, the stream is cut at the limit, a gzip or
deflate body is inflated to at most the limit plus one byte, and a body that does not
arrive within ``timeout`` seconds of its header is refused (408, and the connection
closed: a slow client cannot hold a request open).
"""
import asyncio
import zlib

from lezero.serving.protocol import ProtocolError

__all__ = ["read_body"]


def _declared_length(request, limit):
    declared = request.headers.get("content-length")
    if declared is None:
        return None
    declared = declared.strip()
    if not (declared.isascii() and declared.isdigit()):
        raise ProtocolError(f"Content-Length must be a number of bytes, got "
                            f"{declared[:40]!r}")
    if len(declared) > 19 or int(declared) > limit:
        raise ProtocolError(f"the body of {declared[:40]} bytes is over the server's limit "
                            f"of {limit} bytes", status=413)
    return int(declared)


async def _stream(request, limit):
    chunks, total = [], 0
    async for chunk in request.stream():
        total += len(chunk)
        if total > limit:
            raise ProtocolError(f"the body is over the server's limit of {limit} bytes",
                                status=413)
        chunks.append(chunk)
    return b"".join(chunks)


def _inflate(body, encoding, limit):
    if encoding in ("", "identity"):
        return body
    if encoding not in ("gzip", "deflate"):
        raise ProtocolError(f"Content-Encoding {encoding[:40]!r} is not supported (use gzip, "
                            "deflate or none)", status=415)
    inflater = zlib.decompressobj(31 if encoding == "gzip" else 15)
    try:
        out = inflater.decompress(body, limit + 1)
    except zlib.error as exc:
        raise ProtocolError(f"the {encoding} body does not decompress: {exc}") from None
    if len(out) > limit:
        raise ProtocolError(f"the decompressed body is over the server's limit of "
                            f"{limit} bytes", status=413)
    if not inflater.eof:
        raise ProtocolError(f"the {encoding} body is truncated")
    return out


async def read_body(request, limit, timeout=None):
    """The body of ``request``: at most ``limit`` bytes (also once decompressed),
    received within ``timeout`` seconds (None: no limit)."""
    _declared_length(request, limit)
    try:
        async with asyncio.timeout(timeout):
            body = await _stream(request, limit)
    except TimeoutError:
        raise ProtocolError(f"the request body did not arrive within {timeout:g} s",
                            status=408) from None
    encoding = request.headers.get("content-encoding", "identity").strip().lower()
    return _inflate(body, encoding, limit)
