"""Pipeline schedules as data, in the normal suite (no MPI): the builders' orders, the
simulated bubble against (p-1)/(m+p-1), peak activations and traffic, the deadlock checker
rejecting bad schedules with a message, and the drawings."""
import pytest

from lezero import parallel
from lezero.parallel import Op, Schedule, ScheduleError

pytestmark = pytest.mark.timeout(60)


def order(schedule, rank):
    return [o.label(schedule.chunks) for o in schedule.ops_of(rank)]


def test_gpipe_and_1f1b_orders():
    g = parallel.gpipe(2, 3)
    assert order(g, 0) == ["F0", "F1", "F2", "B0", "B1", "B2"]
    s = parallel.one_f_one_b(3, 4)
    assert order(s, 0) == ["F0", "F1", "F2", "B0", "F3", "B1", "B2", "B3"]
    assert order(s, 2) == ["F0", "B0", "F1", "B1", "F2", "B2", "F3", "B3"]
    assert [(o.step, o.label()) for o in s.ops_of(1)][:3] == [(1, "F0"), (2, "F1"), (4, "B0")]


@pytest.mark.parametrize("p,m", [(2, 1), (2, 4), (4, 4), (4, 8), (3, 7)])
def test_simulated_bubble_equals_theory(p, m):
    for build in (parallel.gpipe, parallel.one_f_one_b):
        result = parallel.simulate(build(p, m), forward_time=1.0, backward_time=2.0)
        assert result.bubble == pytest.approx((p - 1) / (m + p - 1), abs=1e-12)
        assert result.makespan == pytest.approx(3.0 * (m + p - 1))


def test_peak_activations_and_traffic():
    p, m = 4, 8
    assert parallel.simulate(parallel.gpipe(p, m)).peak_activations == [m] * p
    one = parallel.simulate(parallel.one_f_one_b(p, m), activation_bytes=1000)
    assert one.peak_activations == [4, 3, 2, 1]                       # p - rank
    assert one.messages == [m, 2 * m, 2 * m, m]                       # ends send one way
    assert one.bytes_sent == [1000 * n for n in one.messages]


def test_interleaving_shrinks_the_bubble():
    p, m = 4, 8
    inter = parallel.simulate(parallel.interleaved_one_f_one_b(p, m, chunks=2),
                              forward_time=1.0, backward_time=2.0)
    plain = parallel.simulate(parallel.one_f_one_b(p, m), forward_time=0.5,
                              backward_time=1.0)        # the same model in half-size chunks
    assert inter.bubble < plain.bubble
    assert inter.bubble == pytest.approx(parallel.bubble_theory("interleaved", p, m, 2),
                                         abs=0.02)
    with pytest.raises(ValueError, match="must be a multiple of ranks"):
        parallel.interleaved_one_f_one_b(4, 6, chunks=2)


def test_transfer_time_lengthens_the_pipeline():
    fast = parallel.simulate(parallel.one_f_one_b(4, 4), transfer_time=0.0)
    slow = parallel.simulate(parallel.one_f_one_b(4, 4), transfer_time=0.5)
    assert slow.makespan > fast.makespan and slow.bubble > fast.bubble


def ops(p, orders):
    return [Op(r, i, a, mb) for r in range(p) for i, (a, mb) in enumerate(orders[r])]


def test_a_deadlocking_schedule_is_rejected_with_a_message():
    # rank 0 waits for B0 from rank 1; rank 1 first wants F1 from rank 0, which comes
    # after B0 on rank 0: a cycle.
    bad = ops(2, [[("F", 0), ("B", 0), ("F", 1), ("B", 1)],
                  [("F", 1), ("F", 0), ("B", 0), ("B", 1)]])
    with pytest.raises(ScheduleError) as info:
        Schedule(bad, ranks=2, micro_batches=2)
    text = str(info.value)
    assert "deadlocks" in text
    assert "rank 0 waits at step 1 to run B0 (stage 0): it needs the gradient of " \
           "micro-batch 0 from rank 1" in text
    assert "rank 1 waits at step 0 to run F1 (stage 1): it needs the activation of " \
           "micro-batch 1 from rank 0" in text
    assert "waiting cycle: rank 0 -> rank 1 -> rank 0" in text


@pytest.mark.parametrize("change,message", [
    (lambda o: o[:-1], r"B1 of stage 0 \(rank 0\) is missing"),
    (lambda o: o + [Op(0, 9, "F", 0)], "F0 of stage 0 .* repeated 2 times"),
    (lambda o: [x._replace(step=0) if x.rank == 0 else x for x in o],
     "rank 0 has 4 ops at step 0"),
    (lambda o: o[:-1] + [Op(1, 9, "X", 1)], "unknown action 'X'"),
    (lambda o: o[:-1] + [Op(1, 9, "B", 5)], "micro_batch 5 .* out of range"),
])
def test_structural_mistakes_are_named(change, message):
    good = list(parallel.gpipe(2, 2))
    with pytest.raises(ScheduleError, match=message):
        Schedule(change(good), ranks=2, micro_batches=2)


def test_backward_before_forward_is_named():
    bad = ops(1, [[("B", 0), ("F", 0)]])
    with pytest.raises(ScheduleError, match="runs B0 of stage 0 at step 0 before its forward"):
        Schedule(bad, ranks=1, micro_batches=1)


def test_a_hand_written_schedule_of_tuples_runs_the_checker():
    good = Schedule([(0, 0, "F", 0), (1, 1, "F", 0), (1, 2, "B", 0), (0, 3, "B", 0)],
                    ranks=2, micro_batches=1)
    assert parallel.simulate(good).bubble > 0
    with pytest.raises(TypeError, match="each op must be an Op"):
        Schedule(["F0"], ranks=1, micro_batches=1)
    with pytest.raises(ValueError, match="schedule must be one of"):
        parallel.make_schedule("zigzag", 2, 2)
    with pytest.raises(ValueError, match="chunks=2 needs schedule='interleaved'"):
        parallel.make_schedule("1f1b", 2, 2, chunks=2)


def test_text_timeline():
    text = parallel.gpipe(2, 2).text()
    lines = text.splitlines()
    assert lines[0].startswith("gpipe: 2 ranks, 2 micro-batches -- simulated bubble 33.3%")
    assert lines[2] == "rank  0 |F0 F1 .  .  B0 B1"
    assert lines[3] == "rank  1 |.  F0 F1 B0 B1 ."
    inter = parallel.interleaved_one_f_one_b(2, 2, chunks=2).text()
    assert "F0a" in inter and "B1b" in inter


def test_plot_timeline_writes_a_picture(tmp_path):
    pytest.importorskip("matplotlib")
    fig = parallel.one_f_one_b(4, 8).plot(tmp_path / "t.png")
    assert (tmp_path / "t.png").stat().st_size > 2000
    assert len(fig.axes[0].patches) + len(fig.axes[0].collections) >= 4
