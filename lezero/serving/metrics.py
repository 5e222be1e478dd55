"""Prometheus text-format metrics of the server (``GET /metrics``), without a client lib.

Per model (label ``model``):

=====================================  ======================================================
``lezero_queue_length``                gauge: requests waiting in the batcher now
``lezero_requests_total``              counter by ``code``: infer answers by HTTP status
``lezero_request_duration_seconds``    histogram: infer latency, body read to answer
``lezero_request_latency_seconds``     summary: p50/p95/p99 over the last 2048 requests
``lezero_batch_size``                  histogram: samples per batch
``lezero_batches_total``               counter by ``reason``: full, preferred, delay, shutdown
``lezero_batch_errors_total``          counter: batches whose model call raised
``lezero_batch_duration_seconds``      histogram: the model call per batch
``lezero_padding_positions_total``     counter by ``kind`` (``real``, ``padded``): positions
                                       along the padded axis; waste = 1 - real / padded
=====================================  ======================================================
"""
import bisect
import collections
import threading

import numpy as np

__all__ = ["Histogram", "Metrics"]

LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0,
                   5.0, 10.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
QUANTILES = (0.5, 0.95, 0.99)
_KINDS = [("lezero_queue_length", "gauge", "requests waiting in the batcher"),
          ("lezero_requests_total", "counter", "infer answers by HTTP status"),
          ("lezero_request_duration_seconds", "histogram", "infer latency"),
          ("lezero_request_latency_seconds", "summary",
           "infer latency quantiles over the last 2048 requests"),
          ("lezero_batch_size", "histogram", "samples per batch"),
          ("lezero_batches_total", "counter", "batches by the reason they were sent"),
          ("lezero_batch_errors_total", "counter", "batches whose model call failed"),
          ("lezero_batch_duration_seconds", "histogram", "model time per batch"),
          ("lezero_padding_positions_total", "counter",
           "positions along the padded axis, real and padded")]


class Histogram:
    """Cumulative-bucket histogram as Prometheus counts it."""

    def __init__(self, bounds):
        self.bounds = tuple(bounds)
        self.counts = [0] * (len(self.bounds) + 1)      # the last one is +Inf
        self.sum = 0.0
        self.count = 0

    def observe(self, value):
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.sum += value
        self.count += 1

    def lines(self, name, labels):
        out, running = [], 0
        for bound, n in zip(self.bounds + (float("inf"),), self.counts):
            running += n
            le = "+Inf" if bound == float("inf") else f"{bound:g}"
            out.append(f'{name}_bucket{{{labels},le="{le}"}} {running}')
        out += [f"{name}_sum{{{labels}}} {self.sum:.9g}", f"{name}_count{{{labels}}} {self.count}"]
        return out


class _ModelMetrics:
    def __init__(self):
        self.codes = collections.Counter()
        self.duration = Histogram(LATENCY_BUCKETS)
        self.recent = collections.deque(maxlen=2048)
        self.batch_size = Histogram(BATCH_BUCKETS)
        self.batch_time = Histogram(LATENCY_BUCKETS)
        self.reasons = collections.Counter()
        self.errors = 0
        self.real = 0
        self.padded = 0


def _escape(value):
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class Metrics:
    """Thread-safe store: the event loop records requests, batcher threads batches."""

    def __init__(self, models=()):
        self._lock = threading.Lock()
        self._models = {name: _ModelMetrics() for name in models}

    def _get(self, model):
        m = self._models.get(model)
        if m is None:
            m = self._models[model] = _ModelMetrics()
        return m

    def observe_request(self, model, seconds, code):
        with self._lock:
            m = self._get(model)
            m.codes[int(code)] += 1
            if code == 200:
                m.duration.observe(seconds)
                m.recent.append(seconds)

    def observe_batch(self, model, record):
        """An ``on_batch`` hook for the model's batcher."""
        with self._lock:
            m = self._get(model)
            m.batch_size.observe(record.size)
            m.batch_time.observe(record.run_ms / 1000.0)
            m.reasons[record.reason] += 1
            m.errors += record.error is not None
            m.real += record.real_positions
            m.padded += record.padded_positions

    def latency_quantiles(self, model):
        """``{q: seconds}`` over the recent successful requests (empty when none)."""
        with self._lock:
            recent = list(self._get(model).recent)
        if not recent:
            return {}
        return dict(zip(QUANTILES, np.quantile(recent, QUANTILES).tolist()))

    def _model_lines(self, name, m, queue_length):
        """``{metric: lines}`` of one model."""
        lab = f'model="{_escape(name)}"'
        quantiles = []
        if m.recent:
            qs = np.quantile(list(m.recent), QUANTILES)
            quantiles = [f'lezero_request_latency_seconds{{{lab},quantile="{q:g}"}} {v:.6g}'
                         for q, v in zip(QUANTILES, qs)]
        quantiles += [f"lezero_request_latency_seconds_sum{{{lab}}} {m.duration.sum:.9g}",
                      f"lezero_request_latency_seconds_count{{{lab}}} {m.duration.count}"]
        return {
            "lezero_queue_length": [f"lezero_queue_length{{{lab}}} {queue_length}"],
            "lezero_requests_total": [f'lezero_requests_total{{{lab},code="{c}"}} {n}'
                                      for c, n in sorted(m.codes.items())],
            "lezero_request_duration_seconds":
                m.duration.lines("lezero_request_duration_seconds", lab),
            "lezero_request_latency_seconds": quantiles,
            "lezero_batch_size": m.batch_size.lines("lezero_batch_size", lab),
            "lezero_batches_total": [f'lezero_batches_total{{{lab},reason="{r}"}} {n}'
                                     for r, n in sorted(m.reasons.items())],
            "lezero_batch_errors_total": [f"lezero_batch_errors_total{{{lab}}} {m.errors}"],
            "lezero_batch_duration_seconds":
                m.batch_time.lines("lezero_batch_duration_seconds", lab),
            "lezero_padding_positions_total": [
                f'lezero_padding_positions_total{{{lab},kind="real"}} {m.real}',
                f'lezero_padding_positions_total{{{lab},kind="padded"}} {m.padded}'],
        }

    def render(self, queue_lengths):
        """The exposition text; ``queue_lengths`` maps model names to queue lengths."""
        with self._lock:
            body = [self._model_lines(name, m, queue_lengths.get(name, 0))
                    for name, m in sorted(self._models.items())]
        out = []
        for metric, kind, help_text in _KINDS:
            out += [f"# HELP {metric} {help_text}", f"# TYPE {metric} {kind}"]
            for lines in body:
                out += lines[metric]
        return "\n".join(out) + "\n"
