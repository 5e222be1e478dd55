"""Prometheus text of the server's metrics, and that the batcher needs no web stack."""
import os
import subprocess
import sys

import pytest

from lezero.serving.metrics import Histogram, Metrics
from lezero.serving.records import BatchRecord

pytestmark = pytest.mark.timeout(30)


def test_histogram_buckets_are_cumulative():
    h = Histogram((1, 2, 4))
    for v in (1, 1.5, 3, 10):
        h.observe(v)
    lines = h.lines("x", 'model="m"')
    assert lines[:4] == ['x_bucket{model="m",le="1"} 1', 'x_bucket{model="m",le="2"} 2',
                         'x_bucket{model="m",le="4"} 3', 'x_bucket{model="m",le="+Inf"} 4']
    assert lines[4:] == ['x_sum{model="m"} 15.5', 'x_count{model="m"} 4']


def test_render_lists_every_metric_with_help_and_type():
    m = Metrics(["a"])
    m.observe_request("a", 0.003, 200)
    m.observe_request("a", 0.5, 503)
    m.observe_batch("a", BatchRecord(0, 3, "delay", 1, 8, 15, 24, 1.0, 2.0))
    m.observe_batch("a", BatchRecord(1, 1, "full", 0, 0, 1, 1, 1.0, 2.0, error="E: x"))
    text = m.render({"a": 5})
    assert text.endswith("\n")
    samples = dict(ln.rsplit(" ", 1) for ln in text.splitlines() if not ln.startswith("#"))
    assert samples['lezero_queue_length{model="a"}'] == "5"
    assert samples['lezero_requests_total{model="a",code="503"}'] == "1"
    assert samples['lezero_request_duration_seconds_count{model="a"}'] == "1"  # 200s only
    assert samples['lezero_batches_total{model="a",reason="delay"}'] == "1"
    assert samples['lezero_batch_errors_total{model="a"}'] == "1"
    assert samples['lezero_padding_positions_total{model="a",kind="padded"}'] == "25"
    assert samples['lezero_batch_size_bucket{model="a",le="2"}'] == "1"
    assert float(samples['lezero_request_latency_seconds{model="a",quantile="0.5"}']) == \
        pytest.approx(0.003)
    assert text.count("# TYPE") == 9
    assert m.latency_quantiles("a")[0.99] == pytest.approx(0.003)


def test_label_values_are_escaped():
    m = Metrics(['we"ird'])
    assert 'model="we\\"ird"' in m.render({})


def test_the_batcher_imports_no_web_stack():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    code = ("import sys, lezero.serving as s; s.DynamicBatcher(lambda x: x).close(); "
            "print(sorted(m for m in ('starlette', 'uvicorn', 'onnxruntime', 'httpx') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=root), timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
