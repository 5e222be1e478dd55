"""The round-based timing of benchmarks/_common.py, on a fake clock (nothing is timed)."""
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
import _common  # noqa: E402


@pytest.fixture
def fake_clock(monkeypatch):
    """A clock that advances only when a contender runs, by the contender's 'cost'."""
    state = {"now": 0.0}
    monkeypatch.setattr(_common, "clock", lambda: state["now"])
    monkeypatch.setattr(_common.time, "sleep", lambda s: None)
    return state


def contender(state, name, costs, log):
    costs = iter(costs)

    def fn():
        log.append(name)
        state["now"] += next(costs)
    return fn


def test_blocks_alternate_and_the_fastest_step_of_a_block_counts(fake_clock):
    log = []
    a = contender(fake_clock, "a", [9, 9] + [3, 1, 2] + [5, 4, 6], log)
    b = contender(fake_clock, "b", [9, 9] + [2, 2, 2] + [8, 7, 9], log)
    times = _common.interleaved_times([a, b], rounds=2, warmup=2, block=3)
    assert times == [[1, 4], [2, 7]]
    # warm-up, then round 0 in order a, b and round 1 reversed
    assert log == ["a", "a", "b", "b"] + ["a"] * 3 + ["b"] * 3 + ["b"] * 3 + ["a"] * 3


def test_round_ratios_are_medians_of_per_round_ratios(fake_clock):
    log = []
    a = contender(fake_clock, "a", [1] + [1, 4, 3], log)
    b = contender(fake_clock, "b", [1] + [2, 2, 10], log)
    ratios, medians = _common.round_ratios([a, b], rounds=3, warmup=1, block=1)
    assert ratios == [pytest.approx(0.5), 1.0]          # per round 0.5, 2.0, 0.3
    assert medians == [3.0, 2.0]


def test_ratio_range_over_runs():
    runs = iter([[1.0, 0.5], [1.2, 0.4], [0.9, 0.6]])
    ranges, results = _common.ratio_range(lambda: next(runs), runs=3)
    assert ranges == [(0.9, 1.2), (0.4, 0.6)]
    assert len(results) == 3
