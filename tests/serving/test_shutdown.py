"""Graceful stop (issue 32): every request sent before ``stop()`` is answered 200 or with
a JSON 503 (never a TCP reset, never plain text), and ``stop(timeout)`` returns within
about the timeout even when a model call hangs, answering its clients with a JSON 503
and logging no traceback.  Loads are bounded (32 requests, a few seconds)."""
import json
import logging
import re
import socket
import threading
import time

import pytest

from lezero.serving import ServedModel, Server

httpx = pytest.importorskip("httpx")

pytestmark = pytest.mark.timeout(60)

BODY = json.dumps({"inputs": [{"name": "x", "shape": [1, 1], "datatype": "FP32",
                               "data": [1]}]}).encode()
REQUEST = (b"POST /v2/models/m/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
           b"\r\nContent-Length: %d\r\n\r\n" % len(BODY)) + BODY


def slow(x):
    time.sleep(0.02)
    return x + 1


def read_response(sock):
    """One whole HTTP response from ``sock``: (status, head, body); raises on a reset or
    an early close."""
    data = b""
    while True:
        head, sep, body = data.partition(b"\r\n\r\n")
        length = re.search(rb"content-length: (\d+)", head, re.I) if sep else None
        if length and len(body) >= int(length.group(1)):
            return int(head.split()[1]), head.decode("latin-1").lower(), body
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError(f"closed without a whole answer after {data[:80]!r}")
        data += chunk


def check_answers(socks):
    """Every socket got 200, or 503 with a JSON error; returns the count of each."""
    counts = {200: 0, 503: 0}
    for sock in socks:
        status, head, body = read_response(sock)
        assert status in counts, (status, body)
        if status == 503:
            assert "application/json" in head
            assert "error" in json.loads(body)
        counts[status] += 1
    return counts


def keep_alive_connections(server, count):
    """``count`` connections that each had one request answered (idle, kept alive)."""
    socks = [socket.create_connection(("127.0.0.1", server.port), timeout=10)
             for _ in range(count)]
    for sock in socks:
        sock.sendall(REQUEST)
    assert check_answers(socks)[200] == count
    return socks


def test_an_idle_connection_whose_request_is_unread_is_not_reset_at_shutdown():
    """The race behind the probe's resets: a client sends its next request on a
    keep-alive connection, and the shutdown reaches that connection before the event
    loop has read the request.  uvicorn closed it as idle, with the request unread: the
    kernel answered the client with a TCP reset."""
    served = ServedModel(slow, inputs=[("x", "FP32", [1])], warmup=False, max_batch_size=8)
    server = Server({"m": served}, port=0, shutdown_timeout=10).start()
    kept = keep_alive_connections(server, 16)
    try:
        connections = server._uvicorn.server_state.connections
        loop = next(iter(connections)).loop
        sent = threading.Event()

        def busy_then_shut_down():        # runs on the loop: nothing is read meanwhile
            assert sent.wait(10)
            for connection in list(connections):
                connection.shutdown()      # what the server's stop does to each one
        loop.call_soon_threadsafe(busy_then_shut_down)
        time.sleep(0.05)
        for sock in kept:
            sock.sendall(REQUEST)
        sent.set()
        counts = check_answers(kept)       # was ConnectionResetError
        assert sum(counts.values()) == 16
        start = time.perf_counter()
        server.stop()
        assert time.perf_counter() - start < 3
    finally:
        server.stop()
        for sock in kept:
            sock.close()


def test_requests_sent_before_stop_are_answered_while_the_loop_was_busy():
    """Requests on idle keep-alive connections and on connections still in the kernel's
    accept queue, all sent while the event loop was busy, then ``stop()``: each gets 200
    or a JSON 503, and the stop does not wait out its timeout for idle connections."""
    served = ServedModel(slow, inputs=[("x", "FP32", [1])], warmup=False, max_batch_size=8)
    server = Server({"m": served}, port=0, shutdown_timeout=10).start()
    kept = keep_alive_connections(server, 16)
    try:
        loop = next(iter(server._uvicorn.server_state.connections)).loop
        loop.call_soon_threadsafe(time.sleep, 0.5)            # the loop is busy
        time.sleep(0.05)
        new = [socket.create_connection(("127.0.0.1", server.port), timeout=10)
               for _ in range(16)]
        for sock in kept + new:
            sock.sendall(REQUEST)
        start = time.perf_counter()
        server.stop()
        assert time.perf_counter() - start < 3            # was 10 s (shutdown_timeout)
        counts = check_answers(kept + new)
        assert sum(counts.values()) == 32
    finally:
        server.stop()
        for sock in kept + locals().get("new", []):
            sock.close()


def test_bounded_load_then_stop_every_request_gets_200_or_json_503():
    served = ServedModel(slow, inputs=[("x", "FP32", [1])], warmup=False, max_batch_size=4)
    server = Server({"m": served}, port=0, shutdown_timeout=5).start()
    socks = [socket.create_connection(("127.0.0.1", server.port), timeout=10)
             for _ in range(32)]
    try:
        for sock in socks:
            sock.sendall(REQUEST)
        server.stop()
        counts = check_answers(socks)
        assert sum(counts.values()) == 32
    finally:
        server.stop()
        for sock in socks:
            sock.close()


class Hanging:
    def __init__(self):
        self.release, self.entered = threading.Event(), threading.Event()

    def __call__(self, x):
        self.entered.set()
        self.release.wait(30)
        return x


def test_stop_with_a_hanging_model_returns_within_the_timeout(caplog, capfd):
    hanging = Hanging()
    served = ServedModel(hanging, inputs=[("x", "FP32", [1])], warmup=False)
    server = Server({"m": served}, port=0, shutdown_timeout=30).start()
    replies = {}

    def call(i):
        replies[i] = httpx.post(server.url + "/v2/models/m/infer", content=BODY,
                                timeout=30)

    clients = [threading.Thread(target=call, args=(i,)) for i in range(3)]
    try:
        with caplog.at_level(logging.INFO):
            for t in clients:
                t.start()
            assert hanging.entered.wait(10)
            time.sleep(0.2)
            start = time.perf_counter()
            server.stop(timeout=1.0)                     # overrides shutdown_timeout=30
            took = time.perf_counter() - start
            for t in clients:
                t.join(10)
        assert took < 2.0, f"stop took {took:.1f} s"     # was 24 s against 2 s
        for reply in replies.values():
            assert reply.status_code == 503 and reply.headers["content-type"] == \
                "application/json"
            assert "stopped before this request was answered" in reply.json()["error"]
        assert len(replies) == 3
        logged = caplog.text + capfd.readouterr().err
        assert "Traceback" not in logged and "CancelledError" not in logged, logged
        assert "is still running after 1 s" in caplog.text
    finally:
        hanging.release.set()
        server.stop()


def test_stop_timeout_is_checked():
    server = Server({"m": lambda x: x}, port=0)
    with pytest.raises(ValueError, match="timeout"):
        server.stop(timeout=-1)
