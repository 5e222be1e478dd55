"""``adaptive.SplitWhenFaster`` runs a memory-bound kernel split only while the split is
measured faster, and the optimizers' update (``axpy.axpby_numba`` through
``run_update``), which uses it, gives the same elements either way."""
import numpy as np
import pytest

import lezero as lz
from lezero import kernels
from lezero.kernels import axpy
from lezero.runtime import adaptive, policy

pytestmark = pytest.mark.skipif(not kernels.numba_available(), reason="needs Numba")


def _fill(runner, one, split):
    """Pretend the runner measured ``one`` and ``split`` seconds per element (last)."""
    for way, seconds in ((False, one), (True, split)):
        runner.timings[way].clear()
        runner.timings[way].extend([seconds] * 3)


def test_measures_each_way_first_then_runs_the_cheaper(split_parts):
    runner = adaptive.SplitWhenFaster(min_part=10, explore=4)
    x = np.zeros(100, np.float32)
    with lz.using_config("conv_threads", 2):
        for _ in range(4):
            runner.run(lambda a: None, x)
        # each way twice: the first call untimed (cold), the second its first timing
        assert split_parts == [1, 1, 2, 2]
        assert len(runner.timings[False]) == len(runner.timings[True]) == 1
        split_parts.clear()
        for _ in range(16):                          # calls 5 .. 20
            _fill(runner, one=2e-9, split=1e-9)      # (not what this empty kernel takes)
            runner.run(lambda a: None, x)
    # the split is cheaper: it runs; one call, twice as slow, is tried every 2 * 4 calls
    assert split_parts == [2, 2, 2, 1, 2, 2, 2, 2, 2, 2, 2, 1, 2, 2, 2, 2]


def test_a_slower_way_is_tried_less_often():
    """A try of the other way costs about 1/explore of the time: a way 5x slower is tried
    every 5 * explore calls, one 100x slower every MAX_SPACING * explore."""
    for ratio, spacing in ((2.0, 2), (5.0, 5), (100.0, adaptive.Faster.MAX_SPACING)):
        chooser = adaptive.Faster(("a", "b"), explore=4)
        chooser.cold.clear()
        chooser.timings["a"].append(1e-6)
        chooser.timings["b"].append(ratio * 1e-6)
        picks = [chooser.pick() for _ in range(4 * spacing * 3)]
        tried = [i + 1 for i, way in enumerate(picks) if way == "b"]
        assert tried == [4 * spacing * k for k in (1, 2, 3)], (ratio, tried)


def test_the_first_call_of_a_way_is_not_timed():
    chooser = adaptive.Faster(("a", "b"), explore=1000, median=True)
    seen = []
    for _ in range(4):
        way = chooser.pick()
        seen.append(way)
        chooser.timed(way, lambda: None)
    assert seen == ["a", "a", "b", "b"]
    assert [len(chooser.timings[w]) for w in "ab"] == [1, 1]


def test_a_state_change_moves_the_choice(split_parts):
    """Warm cache: one call is cheaper; once its last timings are all slower than the
    split's (a slow spell), the split takes over."""
    runner = adaptive.SplitWhenFaster(min_part=10, explore=1000)
    _fill(runner, one=1e-9, split=2e-9)
    x = np.zeros(100, np.float32)
    with lz.using_config("conv_threads", 2):
        runner.run(lambda a: None, x)
        runner.timings[False].extend([5e-9, 5e-9, 5e-9])   # the whole window moved
        runner.run(lambda a: None, x)
    assert split_parts == [1, 2]


def test_a_cold_first_call_does_not_hold_back_its_way(split_parts):
    """The first call of each way pays page faults; one later call of that way at its
    real speed is enough to bring it back."""
    runner = adaptive.SplitWhenFaster(min_part=10, explore=1000)
    runner.timings[False].extend([1e-6, 1e-9])       # cold first call, then a warm one
    runner.timings[True].append(2e-9)
    with lz.using_config("conv_threads", 2):
        runner.run(lambda a: None, np.zeros(100, np.float32))
    assert split_parts == [1]


def test_one_slow_call_does_not_flip_the_choice(split_parts):
    runner = adaptive.SplitWhenFaster(min_part=10, explore=1000)
    _fill(runner, one=1e-9, split=2e-9)
    runner.timings[False].append(1.0)                # one preempted call
    runner.timings[False].append(1.0)                # and another
    with lz.using_config("conv_threads", 2):
        runner.run(lambda a: None, np.zeros(100, np.float32))
    assert split_parts == [1]


def test_short_arrays_run_directly_and_are_not_timed(split_parts):
    runner = adaptive.SplitWhenFaster(min_part=1000)
    seen = []
    with lz.using_config("conv_threads", 2):
        runner.run(lambda a: seen.append(a.size), np.zeros(100, np.float32))
    assert seen == [100] and split_parts == [] and runner.calls == 0
    assert not runner.timings[False] and not runner.timings[True]


@pytest.mark.parametrize("split_cheaper", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_axpby_split_or_not_equals_the_reference(monkeypatch, split_parts, split_cheaper,
                                                 dtype):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(3 * 1000 + 7).astype(dtype)
    y = rng.standard_normal(x.shape).astype(dtype)
    runner = adaptive.SplitWhenFaster(min_part=1000, explore=1000)
    _fill(runner, one=2e-9 if split_cheaper else 1e-9, split=1e-9 if split_cheaper else 2e-9)
    monkeypatch.setitem(adaptive._updates, policy.update_min_part_items, runner)
    expected = y.copy()
    axpy.axpby_ref(expected, 0.9, x, -0.01)
    got = y.copy()
    with lz.using_config("conv_threads", 3):
        axpy.axpby_numba(got, 0.9, x, -0.01)
    assert split_parts == [3 if split_cheaper else 1]
    np.testing.assert_array_equal(got, expected)


def test_sgd_on_a_large_parameter_matches_torch(threaded):
    """The split update inside an optimizer step: SGD with momentum on a parameter above
    the split size, against torch.optim.SGD."""
    torch = pytest.importorskip("torch")
    from lezero import optim
    rng = np.random.default_rng(0)
    w0 = rng.standard_normal(2 * policy.update_min_part_items + 5).astype(np.float32)
    grads = [rng.standard_normal(w0.shape).astype(np.float32) for _ in range(4)]
    p = lz.Parameter(w0.copy())
    opt = optim.SGD([p], lr=0.1, momentum=0.9)
    tp = torch.tensor(w0.copy(), requires_grad=True)
    topt = torch.optim.SGD([tp], lr=0.1, momentum=0.9)
    with lz.using_config("conv_threads", 2):
        for g in grads:                              # both ways run: measured first
            p.grad = lz.Variable(g.copy())
            opt.step()
            tp.grad = torch.from_numpy(g.copy())
            topt.step()
    np.testing.assert_allclose(p.data, tp.detach().numpy(), rtol=1e-6, atol=1e-6)


def test_the_split_when_faster_setting_turns_it_off(monkeypatch, split_parts):
    runner = adaptive.SplitWhenFaster(min_part=1000, explore=1000)
    _fill(runner, one=2e-9, split=1e-9)              # the split would win
    monkeypatch.setitem(adaptive._updates, policy.update_min_part_items, runner)
    y, x = np.zeros(4000, np.float32), np.ones(4000, np.float32)
    with lz.using_config("conv_threads", 2), lz.using_config("split_when_faster", False):
        axpy.axpby_numba(y, 1.0, x, 0.5)
    assert split_parts == [] and runner.calls == 0
    np.testing.assert_array_equal(y, np.full(4000, 0.5, np.float32))


@pytest.mark.parametrize("kwargs, name", [(dict(min_part=0), "min_part"),
                                          (dict(min_part=10, explore=1), "explore"),
                                          (dict(min_part=10, window=0), "window"),
                                          (dict(min_part=2.5), "min_part")])
def test_bad_arguments_are_named(kwargs, name):
    with pytest.raises((ValueError, TypeError), match=f"SplitWhenFaster.*{name}"):
        adaptive.SplitWhenFaster(**kwargs)


def test_explore_and_window_default_to_the_policy():
    with policy.using(split_explore=5, split_window=2):
        runner = adaptive.SplitWhenFaster(min_part=10)
    assert runner.explore == 5 and runner.timings[True].maxlen == 2


def test_a_meeting_sleeps_at_once_while_that_is_measured_faster(monkeypatch):
    """Each way is tried first; then the cheaper one runs: spinning on a quiet machine,
    sleeping at once while another process holds a core (partners arrive late)."""
    monkeypatch.setattr(adaptive, "_meetings", {})
    seen = []

    def part(i, meeting, spins):
        seen.append((i, spins))
    with lz.using_config("conv_threads", 2):
        for _ in range(4):                         # each way twice (the first untimed)
            adaptive.run_meeting(part, 2, "k")
        del seen[2:6]
        chooser = adaptive._meetings["k"]
        for way, seconds in (("spin", 2e-3), ("sleep", 1e-3)):
            chooser.timings[way].clear()
            chooser.timings[way].extend([seconds] * 3)
        adaptive.run_meeting(part, 2, "k")
    spins = [s for _, s in sorted(seen[:2])] + [s for _, s in sorted(seen[2:4])] + \
        [s for _, s in sorted(seen[4:])]
    assert spins == [policy.meet_spin_reads] * 2 + [0] * 2 + [0] * 2
    seen.clear()
    with lz.using_config("split_when_faster", False):     # no measured switching: spin
        adaptive.run_meeting(part, 2, "k")
    assert sorted(seen) == [(0, policy.meet_spin_reads), (1, policy.meet_spin_reads)]


def test_a_median_chooser_is_not_led_by_one_lucky_call():
    """Under load a spinning meeting is sometimes fast; the meetings' chooser looks at the
    median of the last calls, not at the luckiest one."""
    chooser = adaptive.Faster(("spin", "sleep"), explore=1000, window=5, median=True)
    chooser.timings["spin"].extend([1e-4, 9e-3, 8e-3, 9e-3, 7e-3])
    chooser.timings["sleep"].extend([4e-3, 5e-3, 4e-3, 5e-3, 4e-3])
    assert chooser.pick() == "sleep"
    by_min = adaptive.Faster(("spin", "sleep"), explore=1000, window=5)
    for way in ("spin", "sleep"):
        by_min.timings[way].extend(chooser.timings[way])
    assert by_min.pick() == "spin"
