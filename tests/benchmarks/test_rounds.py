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


def test_three_contenders_take_every_order_in_turn(fake_clock):
    # an A/B beside a reference: each runs in each place, and right after each of the
    # others, equally often over six rounds (reversing the order alone kept the middle
    # one second in every round)
    log = []
    fns = [contender(fake_clock, name, [1] * 7, log) for name in "abc"]
    _common.interleaved_times(fns, rounds=6, warmup=1, block=1)
    rounds = ["".join(log[3 + 3 * r:6 + 3 * r]) for r in range(6)]
    assert sorted(rounds) == ["abc", "acb", "bac", "bca", "cab", "cba"]
    for name in "abc":
        assert [r.index(name) for r in rounds].count(1) == 2
    pairs = [r[i:i + 2] for r in rounds for i in range(2)]
    assert all(pairs.count(p) == 2 for p in ("ab", "ba", "ac", "ca", "bc", "cb"))
