"""Hostile and unlucky clients (issue 32): requests whose declared sizes would make the
server allocate or loop, outputs that are not finite, JSON nested without end, malformed
HTTP, and connections that never finish a request.  Every answer must be strict JSON
with an "error" field, come fast, and leave the server serving.  Servers listen on
127.0.0.1 with port 0; every load is bounded in count and time."""
import json
import math
import os
import socket
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

from lezero.serving import ServedModel, Server

httpx = pytest.importorskip("httpx")
th = pytest.importorskip("tritonclient.http")

pytestmark = pytest.mark.timeout(60)


def _no_constant(name):
    raise ValueError(f"not strict JSON: {name}")


def strict(body):
    """``body`` parsed as strict JSON (NaN, Infinity and -Infinity refused)."""
    return json.loads(body, parse_constant=_no_constant)


def non_finite(x):
    out = x.astype(np.float32).copy()
    out[:, 0], out[:, 1], out[:, 2] = np.nan, np.inf, -np.inf
    return out


@pytest.fixture(scope="module")
def server():
    served = {"any": ServedModel(lambda x: x * 1, inputs=[("x", "FP32", [-1])], warmup=False),
              "two": ServedModel(lambda a, b: a + b, inputs=[("a", "FP32", [-1]),
                                                             ("b", "FP32", [-1])],
                                 warmup=False),
              "nan": ServedModel(non_finite, inputs=[("x", "FP32", [4])], warmup=False),
              "strs": ServedModel(lambda s: s, inputs=[("s", "BYTES", [-1])],
                                  warmup=False)}
    with Server(served, port=0, max_delay_ms=1, max_body_bytes=1 << 20) as s:
        yield s


def post(server, body, path="/v2/models/any/infer", **kwargs):
    if not isinstance(body, bytes):
        body = json.dumps(body).encode()
    return httpx.post(server.url + path, content=body, timeout=20, **kwargs)


def tensor(shape, data, name="x", datatype="FP32", **extra):
    return {"name": name, "shape": list(shape), "datatype": datatype, "data": data, **extra}


def assert_json_error(response, status, match):
    assert response.status_code == status, response.text
    payload = strict(response.content)
    assert list(payload) == ["error"] and match in payload["error"], payload


def good_request_works(server):
    r = post(server, {"inputs": [tensor((1, 2), [1, 2])]})
    assert r.status_code == 200 and strict(r.content)["outputs"][0]["data"] == [1, 2]


# ----- item 1: declared sizes are checked before any allocation or per-row work --------
@pytest.mark.parametrize("binary", [False, True])
def test_ten_million_zero_size_rows_are_refused_at_once(server, binary):
    spec = {"name": "x", "shape": [10_000_000, 0], "datatype": "FP32"}
    if binary:
        head = json.dumps({"inputs": [dict(spec, parameters={"binary_data_size": 0})]})
        headers = {"Inference-Header-Content-Length": str(len(head))}
        body = head.encode()
    else:
        body, headers = json.dumps({"inputs": [dict(spec, data=[])]}).encode(), {}
    start = time.perf_counter()
    r = post(server, body, headers=headers)
    elapsed = time.perf_counter() - start
    assert_json_error(r, 400, "10000000 rows, more than the queue holds (1024)")
    assert elapsed < 1.0, f"took {elapsed:.2f} s"           # was 2 s and +1.3 GB
    start = time.perf_counter()
    good_request_works(server)
    assert time.perf_counter() - start < 2.0


def test_many_rows_across_several_inputs_are_refused_before_the_split(server):
    r = post(server, {"inputs": [tensor((5_000_000, 0), [], "a"),
                                 tensor((5_000_000, 0), [], "b")]}, "/v2/models/two/infer")
    assert_json_error(r, 400, "5000000 rows")


@pytest.mark.parametrize("shape, match", [
    ([10 ** 30, 0], "is too large"),                  # was numpy's "Maximum allowed dimension"
    ([2 ** 40, 2 ** 40], "is too large"),
    ([1, -3], "non-negative ints"),
    ([1] * 40, "at most 32"),
    ("12", "non-negative ints"),
])
def test_shapes_with_huge_or_bad_dims(server, shape, match):
    assert_json_error(post(server, {"inputs": [tensor(shape, [])]}), 400, match)


def test_json_with_millions_of_containers_is_refused_before_parsing(server, monkeypatch):
    from lezero.serving import protocol
    monkeypatch.setattr(protocol, "MAX_JSON_CONTAINERS", 1000)
    body = json.dumps({"inputs": [tensor((2000, 0), [[]] * 2000)]}).encode()
    assert_json_error(post(server, body), 400, "arrays and objects, more than the server "
                                               "parses (1000)")


def test_bytes_tensors_are_bounded_in_count(server, monkeypatch):
    from lezero.serving import protocol
    monkeypatch.setattr(protocol, "MAX_BYTES_ELEMENTS", 8)
    r = post(server, {"inputs": [tensor((1, 9), ["a"] * 9, "s", "BYTES")]},
             "/v2/models/strs/infer")
    assert_json_error(r, 400, "9 strings in one BYTES tensor")
    raw = b"".join(len(b"ab").to_bytes(4, "little") + b"ab" for _ in range(9))
    head = json.dumps({"inputs": [{"name": "s", "shape": [1, 9], "datatype": "BYTES",
                                   "parameters": {"binary_data_size": len(raw)}}]}).encode()
    r = post(server, head + raw, "/v2/models/strs/infer",
             headers={"Inference-Header-Content-Length": str(len(head))})
    assert_json_error(r, 400, "9 strings in one BYTES tensor")


def test_more_binary_strings_than_the_shape_says_stop_early():
    from lezero.serving.protocol import ProtocolError, deserialize_bytes
    raw = (0).to_bytes(4, "little") * 100
    with pytest.raises(ProtocolError, match="more than 3 BYTES elements"):
        deserialize_bytes(raw, "s", limit=3)


@pytest.mark.parametrize("tensor_, match", [
    (tensor((1, 2), 5), "data must be a (nested) list, got int"),
    (tensor((1, 2), {"a": 1}), "data must be a (nested) list, got dict"),
    (tensor((1, 2), [1, 2, 3]), "needs 2 elements, got 3"),
    (tensor((1, 2), ["a", "b"]), "FP32 data must be numbers"),
    (tensor((1, 2), ["a", "b"], datatype="BYTES"), "expected datatype FP32, got BYTES"),
    (tensor((1, 2), [1, 2], datatype="FP64"), "expected datatype FP32, got FP64"),
    (tensor((1, 1), ["\ud800"], datatype="BYTES"), "a string is not valid Unicode"),
    (tensor((1, 1), 1, parameters={"binary_data_size": 4}), "runs past the end"),
])
def test_malformed_tensors_are_400_with_a_message(server, tensor_, match):
    assert_json_error(post(server, {"inputs": [tensor_]}), 400, match)


@pytest.mark.parametrize("params, match", [
    ({"timeout": float("nan")}, "timeout must be a positive number"),
    ({"timeout": float("inf")}, "timeout must be a positive number"),
    ({"priority": 10 ** 30}, "priority must be an int"),
])
def test_non_finite_and_huge_parameters_are_400(server, params, match):
    body = json.dumps({"inputs": [tensor((1, 1), [1])], "parameters": params}).encode()
    assert_json_error(post(server, body), 400, match)


def test_unknown_model_and_invalid_utf8_are_json_errors(server):
    assert_json_error(post(server, {"inputs": []}, "/v2/models/nope/infer"), 404,
                      "unknown model 'nope'")
    assert_json_error(post(server, b'{"inputs": [], "id": "\xff"}'), 400, "not valid JSON")


def test_requests_whose_other_dims_disagree_are_each_answered_right(server):
    lengths = [1, 3, 5, 3, 1, 7, 5, 2] * 2
    results = {}

    def call(i, n):
        r = post(server, {"inputs": [tensor((1, n), list(range(n)))]})
        results[i] = strict(r.content)["outputs"][0]

    threads = [threading.Thread(target=call, args=(i, n)) for i, n in enumerate(lengths)]
    [t.start() for t in threads]
    [t.join(20) for t in threads]
    for i, n in enumerate(lengths):
        assert results[i]["shape"] == [1, n] and results[i]["data"] == list(range(n))


# ----- item 2: never invalid JSON -----------------------------------------------------------
def test_non_finite_outputs_are_strict_json_and_read_back(server):
    r = post(server, {"inputs": [tensor((2, 4), [0.5] * 8)]}, "/v2/models/nan/infer")
    assert r.status_code == 200
    out = strict(r.content)["outputs"][0]          # was [NaN, Infinity, -Infinity, ...]
    assert out["data"][:4] == ["NaN", "Infinity", "-Infinity", 0.5]
    client = th.InferenceServerClient(f"127.0.0.1:{server.port}")
    inp = th.InferInput("x", [2, 4], "FP32")
    for binary in (False, True):
        inp.set_data_from_numpy(np.full((2, 4), 0.5, np.float32), binary_data=binary)
        got = client.infer("nan", [inp], outputs=[th.InferRequestedOutput(
            "output__0", binary_data=binary)]).as_numpy("output__0")
        assert np.isnan(got[:, 0]).all() and (got[:, 1] == np.inf).all()
        assert (got[:, 2] == -np.inf).all() and (got[:, 3] == 0.5).all()
    client.close()


def test_error_messages_with_any_character_are_strict_json():
    from lezero.serving.app import _error
    response = _error("model failed: \ud800 \u00e9", 500)    # Starlette's render raised
    assert strict(response.body) == {"error": "model failed: \ud800 \u00e9"}
    assert response.body.isascii()


# ----- item 3: JSON nested without end --------------------------------------------------------
@pytest.mark.parametrize("depth", [1_000, 100_000, 500_000])
def test_deeply_nested_json_is_400(server, depth):
    body = b'{"inputs": ' + b"[" * depth + b"]" * depth + b"}"
    assert_json_error(post(server, body), 400, "nested too deeply")     # was a 500
    good_request_works(server)


# ----- malformed HTTP and bodies ----------------------------------------------------------
def raw_exchange(port, data, wait=5.0):
    """Send ``data`` on a fresh connection; everything the server sends until it closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=wait) as c:
        c.sendall(data)
        chunks = []
        try:
            while True:
                chunk = c.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
        except socket.timeout:
            pass
    return b"".join(chunks)


def split_response(raw):
    head, _, body = raw.partition(b"\r\n\r\n")
    return int(head.split()[1]), head.decode("latin-1").lower(), body


@pytest.mark.parametrize("request_, status, match", [
    (b"GARBAGE\r\n\r\n", 400, "malformed HTTP request"),
    (b"POST /v2/models/any/infer HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n", 400,
     "malformed HTTP request"),
    (b"POST /v2/models/any/infer HTTP/1.1\r\nHost: x\r\n"
     b"Content-Length: 99999999999999999999999\r\n\r\n{}", 400, "malformed HTTP request"),
    (b"POST /v2/models/any/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 50000000\r\n\r\n{}",
     413, "over the server's limit"),
])
def test_malformed_http_gets_a_json_answer(server, request_, status, match):
    start = time.perf_counter()
    got_status, head, body = split_response(raw_exchange(server.port, request_))
    assert got_status == status and "application/json" in head
    assert match in strict(body)["error"]
    assert time.perf_counter() - start < 3.0     # 413 from Content-Length, body unread


def test_oversized_header_is_431():
    with Server({"m": lambda x: x}, port=0) as s:
        from lezero.serving.connections import Limits
        assert s.limits.max_header_bytes == Limits().max_header_bytes == 64 << 10
        data = b"GET /v2 HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * (100 << 10)
        status, head, body = split_response(raw_exchange(s.port, data))
        assert status == 431 and "over 65536 bytes" in strict(body)["error"]


def test_a_body_that_does_not_arrive_is_408():
    with Server({"m": lambda x: x}, port=0, body_timeout=0.5) as s:
        start = time.perf_counter()
        raw = raw_exchange(s.port, b"POST /v2/models/m/infer HTTP/1.1\r\nHost: x\r\n"
                                   b"Content-Length: 100\r\n\r\n{\"inp")
        status, head, body = split_response(raw)
        assert status == 408 and "did not arrive within 0.5 s" in strict(body)["error"]
        assert "connection: close" in head and time.perf_counter() - start < 3.0


# ----- item 4: idle and silent connections -------------------------------------------------------
def test_silent_connections_are_closed_and_a_good_request_answers():
    with Server({"m": ServedModel(lambda x: x, inputs=[("x", "FP32", [1])])}, port=0,
                header_timeout=0.5) as s:
        silent = [socket.create_connection(("127.0.0.1", s.port)) for _ in range(50)]
        partial = [socket.create_connection(("127.0.0.1", s.port)) for _ in range(10)]
        for c in partial:
            c.sendall(b"POST /v2/models/m/infer HTTP/1.1\r\nHost: x\r\n")   # never ends
        start = time.perf_counter()
        r = httpx.post(s.url + "/v2/models/m/infer", timeout=5,
                       json={"inputs": [tensor((1, 1), [3])]})
        assert r.status_code == 200 and strict(r.content)["outputs"][0]["data"] == [3]
        assert time.perf_counter() - start < 3.0
        for c in silent + partial:
            c.settimeout(5.0)
        assert all(c.recv(100) == b"" for c in silent)       # closed, without an answer
        answers = [c.recv(4096) for c in partial]
        assert all(split_response(a)[0] == 408 for a in answers)
        assert "no complete request header within 0.5 s" in strict(
            split_response(answers[0])[2])["error"]
        assert time.perf_counter() - start < 5.0     # 0.5 s, with room for a busy machine
        for c in silent + partial:
            c.close()


def test_idle_keep_alive_connections_are_closed():
    with Server({"m": lambda x: x}, port=0, keep_alive_timeout=0.3) as s:
        with socket.create_connection(("127.0.0.1", s.port), timeout=3) as c:
            c.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n")
            answer = b""
            while not answer.endswith(b'{"live":true}'):
                answer += c.recv(4096)
            start = time.perf_counter()
            assert c.recv(100) == b""
            assert time.perf_counter() - start < 4.0


def test_past_the_connection_limit_the_longest_idle_connection_makes_room():
    with Server({"m": ServedModel(lambda x: x, inputs=[("x", "FP32", [1])])}, port=0,
                max_connections=8, header_timeout=30) as s:
        silent = []
        for _ in range(20):
            silent.append(socket.create_connection(("127.0.0.1", s.port)))
            time.sleep(0.005)
        r = httpx.post(s.url + "/v2/models/m/infer", timeout=5,
                       json={"inputs": [tensor((1, 1), [1])]})
        assert r.status_code == 200
        for c in silent:
            c.settimeout(0.2)

        def closed(c):
            try:
                return c.recv(1) == b""
            except socket.timeout:
                return False
        states = [closed(c) for c in silent]
        assert all(states[:12]) and not any(states[-6:]), states   # oldest went first
        for c in silent:
            c.close()


class Held:
    def __init__(self):
        self.gate, self.entered = threading.Event(), threading.Event()

    def __call__(self, x):
        self.entered.set()
        assert self.gate.wait(20)
        return x


def test_when_every_connection_is_busy_a_new_one_gets_json_503():
    held = Held()
    served = ServedModel(held, inputs=[("x", "FP32", [1])], warmup=False, max_batch_size=1)
    with Server({"h": served}, port=0, max_connections=2) as s:
        body = json.dumps({"inputs": [tensor((1, 1), [1])]}).encode()
        request_ = (b"POST /v2/models/h/infer HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n"
                    b"\r\n" % len(body)) + body
        busy = [socket.create_connection(("127.0.0.1", s.port), timeout=10) for _ in range(2)]
        for c in busy:
            c.sendall(request_)
        assert held.entered.wait(10)
        time.sleep(0.2)
        status, _, payload = split_response(raw_exchange(s.port, b""))
        assert status == 503 and "limit of 2 connections" in strict(payload)["error"]
        held.gate.set()
        for c in busy:
            assert b" 200 OK" in c.recv(4096)
            c.close()


SERVER_SCRIPT = textwrap.dedent("""
    import resource, sys
    resource.setrlimit(resource.RLIMIT_NOFILE, (200, 200))
    from lezero.serving import ServedModel, Server
    s = Server({"m": ServedModel(lambda x: x, inputs=[("x", "FP32", [1])])}, port=0,
               header_timeout=30).start()
    print(s.port, s.limits.max_connections, flush=True)
    sys.stdin.read()
    s.stop(timeout=1)
""")


def test_silent_connections_cannot_use_up_the_descriptor_limit():
    """The probe's case: 230 silent connections against a 200-descriptor limit."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    proc = subprocess.Popen([sys.executable, "-c", SERVER_SCRIPT], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=root))
    silent = []
    try:
        port, limit = map(int, proc.stdout.readline().split())
        assert 1 <= limit < 200
        for _ in range(230):
            silent.append(socket.create_connection(("127.0.0.1", port), timeout=5))
        r = httpx.post(f"http://127.0.0.1:{port}/v2/models/m/infer", timeout=5,
                       json={"inputs": [tensor((1, 1), [4])]})
        assert r.status_code == 200 and strict(r.content)["outputs"][0]["data"] == [4]
    finally:
        for c in silent:
            c.close()
        proc.stdin.close()
        try:
            proc.wait(20)
        finally:
            if proc.poll() is None:
                proc.kill()


def test_timeouts_and_limits_are_checked_options():
    for kwargs, error, match in [
            (dict(header_timeout=0), ValueError, "header_timeout"),
            (dict(body_timeout=math.inf), ValueError, "body_timeout"),
            (dict(keep_alive_timeout="5"), TypeError, "keep_alive_timeout"),
            (dict(max_connections=0), ValueError, "max_connections")]:
        with pytest.raises(error, match=match):
            Server({"m": lambda x: x}, **kwargs)


def test_a_client_that_never_reads_its_answer_is_cut_off():
    """A big answer to a client that does not read it stays in the write buffer (a
    plain close waits for it to drain: for ever).  Past ``body_timeout`` without the
    client taking anything, the connection is dropped and its memory freed."""
    served = ServedModel(lambda x: x * 1, inputs=[("x", "FP32", [-1])], warmup=False)
    with Server({"m": served}, port=0, body_timeout=0.5) as s:
        x = np.zeros((1, 1 << 20), np.float32)
        head = json.dumps({"inputs": [{"name": "x", "shape": [1, 1 << 20],
                                       "datatype": "FP32",
                                       "parameters": {"binary_data_size": x.nbytes}}]})
        body = head.encode() + x.tobytes()
        connections = s._uvicorn.server_state.connections
        with socket.create_connection(("127.0.0.1", s.port)) as c:
            c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            c.sendall(b"POST /v2/models/m/infer HTTP/1.1\r\nHost: x\r\n"
                      b"Inference-Header-Content-Length: %d\r\nContent-Length: %d\r\n\r\n"
                      % (len(head), len(body)) + body)
            start = time.monotonic()
            time.sleep(0.3)
            assert connections                  # the answer waits in the write buffer
            while connections and time.monotonic() - start < 5:
                time.sleep(0.05)
            assert not connections, "the connection is still open"     # was: for ever
        good = httpx.post(s.url + "/v2/models/m/infer", timeout=5,
                          json={"inputs": [tensor((1, 1), [2])]})
        assert good.status_code == 200


def test_an_unread_body_after_an_early_answer_is_not_taken_for_a_header(server):
    """A 404 answered before its 200 KB body was read: the rest of the body is not a
    request header (no 431), and the connection serves the next request."""
    with httpx.Client(timeout=10) as client:
        r = client.post(server.url + "/v2/models/nope/infer", content=b"x" * (200 << 10))
        assert_json_error(r, 404, "unknown model 'nope'")
        r = client.post(server.url + "/v2/models/any/infer",
                        json={"inputs": [tensor((1, 1), [5])]})
        assert r.status_code == 200 and strict(r.content)["outputs"][0]["data"] == [5]


def test_the_documented_defaults():
    from lezero.serving import protocol
    s = Server({"m": lambda x: x})
    assert (s.limits.header_timeout, s.body_timeout, s.keep_alive_timeout,
            s.limits.send_timeout, s.limits.max_connections, s.shutdown_timeout,
            s.max_body_bytes) == (10.0, 60.0, 5.0, 60.0, 1024, 10.0, 64 << 20)
    assert (protocol.MAX_RANK, protocol.MAX_ELEMENTS, protocol.MAX_JSON_CONTAINERS,
            protocol.MAX_BYTES_ELEMENTS, protocol.MAX_TENSORS) == \
        (32, 2 ** 40, 2 ** 20, 2 ** 20, 1024)


def test_too_many_tensors_and_non_bool_flags_are_400(server):
    from lezero.serving import protocol
    many = [tensor((1, 1), [1], f"x{i}") for i in range(protocol.MAX_TENSORS + 1)]
    assert_json_error(post(server, {"inputs": many}), 400, "lists 1025 tensors")
    outputs = [{"name": "y"}] * (protocol.MAX_TENSORS + 1)
    body = {"inputs": [tensor((1, 1), [1])], "outputs": outputs}
    assert_json_error(post(server, body), 400, "'outputs' lists 1025 tensors")
    body = {"inputs": [tensor((1, 1), [1])],
            "outputs": [{"name": "output__0", "parameters": {"binary_data": "false"}}]}
    assert_json_error(post(server, body), 400, "binary_data must be a bool")


def run_guarded(app, abandoning=False):
    """The messages ``guard(app)`` sends for one HTTP request (the server's rule: a
    second response start is a RuntimeError)."""
    import asyncio
    from lezero.serving.connections import Limits
    from lezero.serving.guard import guard
    sent = []

    async def send(message):
        if message["type"] == "http.response.start" and sent:
            raise RuntimeError("response already started")
        sent.append(message)

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    limits = Limits(abandoning=abandoning)
    asyncio.run(guard(app, limits)({"type": "http", "path": "/x"}, receive, send))
    return sent


def test_the_guard_turns_what_escapes_into_json(caplog):
    import asyncio

    async def fails(scope, receive, send):
        raise KeyError("boom")

    async def answered_then_fails(scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": []})
        raise KeyError("boom")

    async def cancelled(scope, receive, send):
        raise asyncio.CancelledError()

    sent = run_guarded(fails)
    assert sent[0]["status"] == 500
    assert strict(sent[1]["body"]) == {"error": "internal server error: KeyError"}
    assert "unhandled KeyError on /x" in caplog.text and "Traceback" not in caplog.text
    caplog.clear()
    assert [m.get("status") for m in run_guarded(answered_then_fails)] == [200]
    assert caplog.text == ""                      # answered (and logged) already
    sent = run_guarded(cancelled, abandoning=True)
    assert sent[0]["status"] == 503 and "stopped before" in strict(sent[1]["body"])["error"]
    with pytest.raises(asyncio.CancelledError):   # not at shutdown: a real cancellation
        run_guarded(cancelled)


def test_ten_million_rows_as_nested_empty_lists_are_refused_before_parsing():
    """The JSON form of the 10M-row request (30 MB of ``[],``): counted and refused
    before ``json.loads`` would build ten million lists."""
    served = ServedModel(lambda x: x, inputs=[("x", "FP32", [-1])], warmup=False)
    with Server({"m": served}, port=0) as s:
        rows = 10_000_000
        body = (b'{"inputs": [{"name": "x", "shape": [%d, 0], "datatype": "FP32", "data": ['
                % rows + b"[]," * (rows - 1) + b"[]]}]}")
        start = time.perf_counter()
        r = post(s, body, "/v2/models/m/infer")
        assert_json_error(r, 400, "10000005 arrays and objects, more than the server parses")
        assert time.perf_counter() - start < 3.0
