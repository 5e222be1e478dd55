"""``TimerHook``: calls and time per Function class, for finding where a step goes.

    with lz.TimerHook() as timer:
        loss = model(x); loss.backward()
    timer.print_report()
"""
import sys
import time
from collections import defaultdict

from lezero.core.hooks import FunctionHook

__all__ = ["TimerHook"]


class TimerHook(FunctionHook):
    """Count calls and wall time per Function class, separately for forward and backward.

    Backward times include the operators that a backward itself calls.  On the GPU the
    times measure launch, not completion, unless the caller synchronises.
    """

    def __init__(self):
        self.records = defaultdict(lambda: {"calls": 0, "forward_s": 0.0,
                                            "backward_calls": 0, "backward_s": 0.0})
        self._starts = []

    def forward_preprocess(self, function, in_data):
        self._starts.append(time.perf_counter())

    def forward_postprocess(self, function, in_data):
        rec = self.records[type(function).__name__]
        rec["calls"] += 1
        rec["forward_s"] += time.perf_counter() - self._starts.pop()

    def backward_preprocess(self, function, grad_outputs):
        self._starts.append(time.perf_counter())

    def backward_postprocess(self, function, grad_outputs):
        rec = self.records[type(function).__name__]
        rec["backward_calls"] += 1
        rec["backward_s"] += time.perf_counter() - self._starts.pop()

    def summary(self):
        """{function name: {calls, forward_s, backward_calls, backward_s}}, slowest first."""
        items = sorted(self.records.items(),
                       key=lambda kv: -(kv[1]["forward_s"] + kv[1]["backward_s"]))
        return {name: dict(rec) for name, rec in items}

    def total_time(self):
        """Seconds spent in all recorded forward and backward calls."""
        return sum(r["forward_s"] + r["backward_s"] for r in self.records.values())

    def print_report(self, file=None):
        """Print one line per Function class: calls, forward ms, backward ms."""
        file = file or sys.stdout
        print(f"{'function':<28}{'calls':>8}{'forward ms':>14}{'backward ms':>14}", file=file)
        for name, rec in self.summary().items():
            print(f"{name:<28}{rec['calls']:>8}{rec['forward_s'] * 1e3:>14.3f}"
                  f"{rec['backward_s'] * 1e3:>14.3f}", file=file)
