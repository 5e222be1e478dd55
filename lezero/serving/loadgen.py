"""A closed-loop load generator for a KServe v2 server on this machine (loopback only).

    result = run_load("http://127.0.0.1:8000", "digits", samples, concurrency=16,
                      requests=2000, time_limit=10.0)
    print(result.throughput, result.percentile(95), result.lost, result.duplicates)

``concurrency`` connections each send one request, wait for its answer, send the next,
until ``requests`` have been sent or ``time_limit`` seconds have passed: the run is
bounded in count and in time.  Requests carry binary tensors (as ``tritonclient``
sends them) and a unique ``id``; every answer is matched to its id, so a request lost,
answered twice or answered with another request's id is counted, never missed.  The
client is a minimal HTTP/1.1 one on asyncio streams: it costs little CPU, so what is
measured is the server.  It refuses hosts other than loopback.
"""
import asyncio
import collections
import dataclasses
import json
import threading
import time
import urllib.parse

import numpy as np

from lezero.serving.protocol import datatype_of, numpy_dtype
from lezero.utils.checks import check_int, check_number, check_type

__all__ = ["LoadResult", "encode_binary_request", "run_load"]

LOOPBACK = ("127.0.0.1", "localhost", "::1")


@dataclasses.dataclass
class LoadResult:
    """What a run measured.  ``latencies``: seconds of each successful request."""

    model: str
    concurrency: int
    sent: int
    ok: int
    errors: dict
    duplicates: int
    lost: int
    wrong: int
    seconds: float
    latencies: np.ndarray

    @property
    def throughput(self):
        """Successful requests per second."""
        return self.ok / self.seconds if self.seconds else 0.0

    def percentile(self, q):
        """The q-th percentile latency in milliseconds."""
        return float(np.percentile(self.latencies, q) * 1000) if len(self.latencies) else \
            float("nan")

    def summary(self):
        return {"model": self.model, "concurrency": self.concurrency, "sent": self.sent,
                "ok": self.ok, "errors": dict(self.errors), "lost": self.lost,
                "duplicates": self.duplicates, "wrong": self.wrong,
                "throughput": round(self.throughput, 1),
                **{f"p{q}_ms": round(self.percentile(q), 3) for q in (50, 95, 99)}}


def encode_binary_request(inputs, request_id=""):
    """A request body with binary tensors and binary outputs: ``(body, header_length)``.
    ``inputs`` maps input names to arrays that include the batch axis."""
    specs, blobs = [], []
    for name, array in inputs.items():
        array = np.ascontiguousarray(array)
        blob = array.astype(array.dtype.newbyteorder("<")).tobytes()
        specs.append({"name": name, "shape": list(array.shape),
                      "datatype": datatype_of(array.dtype),
                      "parameters": {"binary_data_size": len(blob)}})
        blobs.append(blob)
    head = json.dumps({"id": request_id, "inputs": specs,
                       "parameters": {"binary_data_output": True}}).encode()
    return head + b"".join(blobs), len(head)


def _decode_response(body, header_length):
    head = json.loads(body[:header_length] if header_length else body)
    outputs, offset = {}, header_length or 0
    for out in head.get("outputs", []):
        size = (out.get("parameters") or {}).get("binary_data_size")
        dtype = numpy_dtype(out["datatype"])
        if size is None:
            outputs[out["name"]] = np.array(out["data"], dtype=dtype).reshape(out["shape"])
        else:
            outputs[out["name"]] = np.frombuffer(body[offset:offset + size],
                                                 dtype=dtype).reshape(out["shape"])
            offset += size
    return head.get("id", ""), outputs


async def _read_response(reader):
    status = int((await reader.readline()).split()[1])
    headers = {}
    while True:
        line = await reader.readline()
        if line in (b"\r\n", b"\n", b""):
            break
        key, _, value = line.decode("latin-1").partition(":")
        headers[key.strip().lower()] = value.strip()
    body = await reader.readexactly(int(headers.get("content-length", 0)))
    return status, headers, body


class _Run:
    def __init__(self, model, samples, requests, deadline, check):
        self.model, self.samples, self.requests = model, samples, requests
        self.deadline, self.check = deadline, check
        self.next_id = 0
        self.answers = collections.Counter()
        self.errors = collections.Counter()
        self.latencies, self.wrong = [], 0

    def take(self):
        if self.next_id >= self.requests or time.perf_counter() >= self.deadline:
            return None
        self.next_id += 1
        return self.next_id - 1

    def record(self, index, status, headers, body, seconds):
        if status != 200:
            self.errors[status] += 1
            return
        header = headers.get("inference-header-content-length")
        rid, outputs = _decode_response(body, int(header) if header else None)
        self.answers[rid] += 1
        if rid != str(index) or (self.check and not self.check(index, outputs)):
            self.wrong += 1
        self.latencies.append(seconds)


async def _connection(run, host, port):
    """One client connection in a closed loop; a broken connection ends it (the request
    it carried counts as lost)."""
    try:
        reader, writer = await asyncio.open_connection(host, port)
    except OSError:
        run.errors["connect"] += 1
        return
    path = f"/v2/models/{run.model}/infer"
    try:
        while (index := run.take()) is not None:
            inputs = run.samples[index % len(run.samples)]
            body, header = encode_binary_request(inputs, str(index))
            head = (f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Length: {len(body)}\r\n"
                    f"Content-Type: application/octet-stream\r\n"
                    f"Inference-Header-Content-Length: {header}\r\n\r\n").encode()
            start = time.perf_counter()
            writer.write(head + body)
            await writer.drain()
            status, headers, data = await _read_response(reader)
            run.record(index, status, headers, data, time.perf_counter() - start)
    except (OSError, asyncio.IncompleteReadError, ValueError, IndexError):
        run.errors["connection"] += 1
    finally:
        writer.close()


def _run_to_completion(coroutine_fn):
    """``asyncio.run``, in a helper thread when this thread already runs a loop (a
    Jupyter kernel does)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine_fn())
    box = {}

    def target():
        try:
            box["value"] = asyncio.run(coroutine_fn())
        except BaseException as exc:    # noqa: BLE001 -- re-raised in the caller
            box["error"] = exc
    thread = threading.Thread(target=target, name="lezero-loadgen")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


def run_load(url, model, samples, concurrency=8, requests=1000, time_limit=10.0,
             check=None):
    """Drive ``model`` at ``url`` (see the module docstring); returns a ``LoadResult``.

    samples: a list of ``{input name: array with batch axis}``; request i sends
        ``samples[i % len(samples)]``.
    check: optional ``check(i, outputs) -> bool`` run on each answer (``outputs`` maps
        output names to arrays); a False counts the answer as ``wrong``."""
    where = "run_load"
    parsed = urllib.parse.urlparse(check_type(where, "url", url, str))
    if parsed.hostname not in LOOPBACK:
        raise ValueError(f"{where}: drives servers on this machine only (loopback), "
                         f"got host {parsed.hostname!r}")
    check_type(where, "samples", samples, list, "a list of {name: array} dicts")
    if not samples:
        raise ValueError(f"{where}: samples is empty")
    concurrency = check_int(where, "concurrency", concurrency, low=1, high=1024)
    requests = check_int(where, "requests", requests, low=1)
    time_limit = check_number(where, "time_limit", time_limit, low=0, low_open=True)

    async def main():
        start = time.perf_counter()
        run = _Run(model, samples, requests, start + time_limit, check)
        await asyncio.gather(*(_connection(run, parsed.hostname, parsed.port or 80)
                               for _ in range(concurrency)))
        return run, time.perf_counter() - start

    run, seconds = _run_to_completion(main)
    ok = sum(run.answers.values())
    duplicates = sum(n - 1 for n in run.answers.values() if n > 1)
    answered = ok + sum(n for k, n in run.errors.items() if isinstance(k, int))
    return LoadResult(model, concurrency, run.next_id, ok, dict(run.errors), duplicates,
                      run.next_id - answered, run.wrong, seconds, np.array(run.latencies))
