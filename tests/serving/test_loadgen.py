"""The loopback load generator: bounded runs, every request accounted for."""
import asyncio

import numpy as np
import pytest

from lezero.serving import ServedModel, Server
from lezero.serving.loadgen import encode_binary_request, run_load
from lezero.serving.protocol import parse_infer_request

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def server():
    models = {"double": ServedModel(lambda x: x * 2, inputs=[("x", "FP32", [3])],
                                    max_delay_ms=1),
              "broken": ServedModel(lambda x: 1 / 0, inputs=[("x", "FP32", [3])],
                                    warmup=False)}
    with Server(models, port=0) as s:
        yield s


def samples(n=5):
    return [{"x": np.full((1, 3), i, np.float32)} for i in range(n)]


def test_every_request_is_answered_once_and_checked(server):
    seen = []

    def check(i, outputs):
        seen.append(i)
        return np.array_equal(outputs["output__0"], np.full((1, 3), 2 * (i % 5)))

    r = run_load(server.url, "double", samples(), concurrency=8, requests=200, check=check)
    assert (r.sent, r.ok, r.lost, r.duplicates, r.wrong) == (200, 200, 0, 0, 0)
    assert sorted(seen) == list(range(200)) and len(r.latencies) == 200
    assert r.throughput > 0 and r.percentile(50) <= r.percentile(99)
    assert r.summary()["ok"] == 200


def test_wrong_answers_and_errors_are_counted(server):
    r = run_load(server.url, "double", samples(), concurrency=2, requests=20,
                 check=lambda i, out: False)
    assert r.wrong == 20
    r = run_load(server.url, "broken", samples(), concurrency=2, requests=10)
    assert r.ok == 0 and r.errors == {500: 10} and r.lost == 0


def test_runs_are_bounded_in_time(server):
    r = run_load(server.url, "double", samples(), concurrency=2, requests=10 ** 9,
                 time_limit=0.3)
    assert r.seconds < 5 and r.sent == r.ok < 10 ** 9


def test_works_inside_a_running_event_loop(server):
    async def main():
        return run_load(server.url, "double", samples(), concurrency=2, requests=10)
    assert asyncio.run(main()).ok == 10


def test_refuses_other_hosts_and_bad_arguments():
    with pytest.raises(ValueError, match="loopback"):
        run_load("http://example.com:8000", "m", samples())
    with pytest.raises(ValueError, match="samples is empty"):
        run_load("http://127.0.0.1:1", "m", [])
    with pytest.raises(ValueError, match="concurrency must be a positive int"):
        run_load("http://127.0.0.1:1", "m", samples(), concurrency=0)


def test_a_closed_port_counts_connection_errors():
    r = run_load("http://127.0.0.1:1", "m", samples(), concurrency=3, requests=5)
    assert r.errors == {"connect": 3} and r.sent == 0


def test_binary_request_round_trips_through_the_parser():
    body, header = encode_binary_request({"a": np.arange(4, dtype=np.int64).reshape(1, 4)},
                                         "r1")
    req = parse_infer_request(body, header)
    assert req.id == "r1" and req.binary_output
    np.testing.assert_array_equal(req.inputs["a"], [[0, 1, 2, 3]])
