"""DynamicBatcher semantics: results, ordering, sending rules, priorities, timeouts, a full
queue, model errors, shutdown, cancellation, the asyncio form and many threads at once."""
import asyncio
import concurrent.futures
import threading
import time

import numpy as np
import pytest

import lezero as lz
from lezero.serving import (BatcherClosedError, DynamicBatcher, QueueFullError,
                            RequestTimeoutError)

pytestmark = pytest.mark.timeout(30)


class Gated:
    """A model that records each batch and holds its first call until ``release``:
    while it is held, requests pile up in the queue in a known state."""

    def __init__(self, hold=True):
        self.batches = []
        self.started = threading.Event()
        self.release = threading.Event()
        if not hold:
            self.release.set()

    def __call__(self, x):
        self.batches.append(x.copy())
        self.started.set()
        assert self.release.wait(10)
        return x * 10


def sample(v):
    return np.array([v], dtype=np.float32)


def test_each_request_gets_its_own_row_of_the_batch_output():
    with DynamicBatcher(lambda x: x @ np.arange(6, dtype=np.float32).reshape(3, 2),
                        max_batch_size=8, max_delay_ms=20) as b:
        xs = [np.full(3, i, np.float32) for i in range(5)]
        futures = [b.submit(x) for x in xs]
        got = [f.result(5) for f in futures]
    for x, y in zip(xs, got):
        np.testing.assert_allclose(y, x @ np.arange(6, dtype=np.float32).reshape(3, 2))
    assert [r.size for r in b.records] == [5]        # one batch, sent on the delay
    assert b.records[0].reason == "delay"


def test_batches_keep_arrival_order_and_full_batches_leave_at_once():
    fn = Gated()
    with DynamicBatcher(fn, max_batch_size=3, max_delay_ms=10_000) as b:
        first = [b.submit(sample(-1)) for _ in range(3)]    # full: sent at once
        assert fn.started.wait(5)                      # the worker is busy with batch 1
        futures = [b.submit(sample(i)) for i in range(6)]
        fn.release.set()
        results = [f.result(5)[0] for f in futures]
        assert [f.result(5)[0] for f in first] == [-10] * 3
    assert results == [10.0 * i for i in range(6)]
    assert [list(x[:, 0]) for x in fn.batches[1:]] == [[0, 1, 2], [3, 4, 5]]
    # a delay of 10 s was never reached: both batches were full
    assert [r.reason for r in b.records[1:]] == ["full", "full"]


def test_preferred_size_is_sent_without_waiting_for_the_delay():
    fn = Gated()
    with DynamicBatcher(fn, max_batch_size=8, max_delay_ms=10_000,
                        preferred_batch_sizes=[2, 4]) as b:
        b.submit(sample(-1))
        b.submit(sample(-1))                            # a preferred size: sent at once
        assert fn.started.wait(5)
        futures = [b.submit(sample(i)) for i in range(5)]
        fn.release.set()
        t0 = time.monotonic()
        for f in futures[:4]:
            f.result(5)
        assert time.monotonic() - t0 < 5                # not the 10 s delay
        assert not futures[4].done()                    # 1 left: no preferred size fits
    futures[4].result(5)                                # drained by close
    assert [(r.size, r.reason) for r in b.records[1:]] == [(4, "preferred"), (1, "shutdown")]


def test_smaller_priority_number_is_served_first():
    fn = Gated()
    with DynamicBatcher(fn, max_batch_size=1, max_delay_ms=0) as b:
        b.submit(sample(-1))
        assert fn.started.wait(5)
        low = [b.submit(sample(i), priority=5) for i in range(3)]
        high = b.submit(sample(100), priority=-1)
        mid = b.submit(sample(50), priority=0)
        fn.release.set()
        for f in low + [high, mid]:
            f.result(5)
    assert [float(x[0, 0]) for x in fn.batches[1:]] == [100, 50, 0, 1, 2]


def test_priority_also_decides_between_groups_of_different_shapes():
    fn = Gated()
    with DynamicBatcher(fn, max_batch_size=2, max_delay_ms=0) as b:
        b.submit(sample(-1))
        assert fn.started.wait(5)
        slow = [b.submit(np.zeros(3, np.float32), priority=3) for _ in range(2)]
        urgent = b.submit(np.zeros(5, np.float32), priority=1)
        fn.release.set()
        for f in slow + [urgent]:
            f.result(5)
    assert [x.shape for x in fn.batches[1:]] == [(1, 5), (2, 3)]


def test_request_timing_out_in_the_queue_gets_a_timeout_error_and_others_proceed():
    fn = Gated()
    with DynamicBatcher(fn, max_batch_size=4, max_delay_ms=0) as b:
        b.submit(sample(-1))
        assert fn.started.wait(5)
        doomed = b.submit(sample(1), timeout_ms=30)
        patient = b.submit(sample(2))
        with pytest.raises(RequestTimeoutError, match="past its timeout of 30.0 ms"):
            doomed.result(5)                            # while the model is still held
        fn.release.set()
        assert patient.result(5)[0] == 20
    assert b.stats()["expired"] == 1
    assert all(1.0 not in x for x in fn.batches)        # the expired request never ran


def test_default_timeout_comes_from_the_batcher():
    fn = Gated()
    with DynamicBatcher(fn, max_batch_size=1, max_delay_ms=0, timeout_ms=20) as b:
        first = b.submit(sample(0))
        assert fn.started.wait(5)
        late = b.submit(sample(1))
        with pytest.raises(RequestTimeoutError):
            late.result(5)
        fn.release.set()
        first.result(5)


def test_full_queue_refuses_at_once_with_a_clear_error():
    fn = Gated()
    with DynamicBatcher(fn, max_batch_size=1, max_delay_ms=0, max_queue_size=2) as b:
        b.submit(sample(0))
        assert fn.started.wait(5)
        queued = [b.submit(sample(1)), b.submit(sample(2))]
        t0 = time.monotonic()
        with pytest.raises(QueueFullError, match=r"queue full \(2 requests waiting\)"):
            b.submit(sample(3))
        assert time.monotonic() - t0 < 0.5              # refused, not blocked
        fn.release.set()
        assert [f.result(5)[0] for f in queued] == [10, 20]
    stats = b.stats()
    assert (stats["rejected"], stats["submitted"], stats["completed"]) == (1, 3, 3)


def test_model_error_fails_only_its_batch_and_the_batcher_keeps_serving():
    def fn(x):
        if (x < 0).any():
            raise RuntimeError("negative input")
        return x + 1

    with DynamicBatcher(fn, max_batch_size=4, max_delay_ms=0) as b:
        bad = b.submit(sample(-5))
        with pytest.raises(RuntimeError, match="negative input"):
            bad.result(5)
        good = [b.submit(sample(i)) for i in range(3)]
        assert [f.result(5)[0] for f in good] == [1, 2, 3]
    stats = b.stats()
    assert stats["failed"] == 1 and stats["completed"] == 3
    assert b.records[0].error == "RuntimeError: negative input"


def test_wrong_batch_size_from_the_model_is_reported_to_the_requests():
    with DynamicBatcher(lambda x: x[:1], max_batch_size=4, max_delay_ms=20) as b:
        futures = [b.submit(sample(i)) for i in range(3)]
        for f in futures:
            with pytest.raises(ValueError, match="for a batch of 3"):
                f.result(5)
        b.close()


def test_requests_of_different_shapes_never_share_a_batch():
    seen = []

    def fn(x):
        seen.append(x.shape)
        return x.sum(axis=1)

    with DynamicBatcher(fn, max_batch_size=8, max_delay_ms=20) as b:
        futures = [b.submit(np.ones(n, np.float32)) for n in (2, 3, 2, 3, 3)]
        assert [f.result(5) for f in futures] == [2, 3, 2, 3, 3]
    assert sorted(seen) == [(2, 2), (3, 3)]


def test_close_drains_the_queue_without_waiting_for_the_delay():
    b = DynamicBatcher(lambda x: x * 2, max_batch_size=64, max_delay_ms=60_000)
    futures = [b.submit(sample(i)) for i in range(10)]
    t0 = time.monotonic()
    b.close()
    assert time.monotonic() - t0 < 5
    assert [f.result(0)[0] for f in futures] == [2.0 * i for i in range(10)]
    assert {r.reason for r in b.records} == {"shutdown"}
    with pytest.raises(BatcherClosedError):
        b.submit(sample(0))
    b.close()                                           # twice is fine


def test_close_without_drain_fails_the_waiting_requests():
    fn = Gated()
    b = DynamicBatcher(fn, max_batch_size=1, max_delay_ms=0)
    running = b.submit(sample(0))
    assert fn.started.wait(5)
    waiting = b.submit(sample(1))
    closer = threading.Thread(target=b.close, kwargs={"drain": False})
    closer.start()
    with pytest.raises(BatcherClosedError, match="without draining"):
        waiting.result(5)
    fn.release.set()
    closer.join(5)
    assert running.result(5)[0] == 0                    # the running batch finishes


def test_a_cancelled_request_is_skipped():
    fn = Gated()
    with DynamicBatcher(fn, max_batch_size=4, max_delay_ms=0) as b:
        b.submit(sample(0))
        assert fn.started.wait(5)
        gone = b.submit(sample(1))
        kept = b.submit(sample(2))
        assert gone.cancel()
        fn.release.set()
        assert kept.result(5)[0] == 20
    assert all(1.0 not in x for x in fn.batches)
    assert b.stats()["cancelled"] == 1


def test_submit_async_awaits_the_result():
    async def main(b):
        return await asyncio.gather(*(b.submit_async(sample(i)) for i in range(6)))

    with DynamicBatcher(lambda x: x - 1, max_batch_size=3, max_delay_ms=50) as b:
        out = asyncio.run(main(b))
    assert [float(y[0]) for y in out] == [-1, 0, 1, 2, 3, 4]
    assert [r.reason for r in b.records] == ["full", "full"]


def test_submit_many_async_admits_all_rows_or_none():
    fn = Gated()

    async def main(b):
        first = asyncio.ensure_future(b.submit_async(sample(-1)))
        while not fn.started.is_set():
            await asyncio.sleep(0.001)
        with pytest.raises(QueueFullError):
            await b.submit_many_async([sample(i) for i in range(4)])
        assert b.queue_length == 0                      # none of the four was queued
        rows = asyncio.ensure_future(b.submit_many_async([sample(i) for i in range(3)]))
        await asyncio.sleep(0.01)
        fn.release.set()
        return await first, await rows

    with DynamicBatcher(fn, max_batch_size=4, max_delay_ms=0, max_queue_size=3) as b:
        first, rows = asyncio.run(main(b))
    assert first[0] == -10 and [float(r[0]) for r in rows] == [0, 10, 20]
    assert b.stats()["rejected"] == 4


def test_cancelling_an_awaiting_task_withdraws_its_request():
    fn = Gated()

    async def main(b):
        b.submit(sample(0))
        while not fn.started.is_set():
            await asyncio.sleep(0.001)
        task = asyncio.ensure_future(b.submit_async(sample(1)))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        fn.release.set()

    with DynamicBatcher(fn, max_batch_size=4, max_delay_ms=0) as b:
        asyncio.run(main(b))
    assert b.stats()["cancelled"] == 1 and len(fn.batches) == 1


def test_tuple_inputs_and_dict_outputs():
    def fn(a, b):
        return {"sum": a + b, "prod": a * b}

    with DynamicBatcher(fn, max_batch_size=4, max_delay_ms=5) as bt:
        out = bt.submit((sample(2), sample(3))).result(5)
    assert set(out) == {"sum", "prod"} and out["sum"][0] == 5 and out["prod"][0] == 6


def test_model_runs_without_graph_and_in_test_mode():
    seen = {}

    def fn(x):
        seen["backprop"] = lz.Config.enable_backprop
        seen["train"] = lz.Config.train
        return lz.Variable(x) * 2

    with DynamicBatcher(fn, max_delay_ms=0) as b:
        assert b.submit(lz.Variable(sample(1))).result(5)[0] == 2
    assert seen == {"backprop": False, "train": False}


def test_many_threads_every_request_answered_exactly_once():
    calls = []

    def fn(x):
        calls.append(len(x))
        return x[:, ::-1].copy()

    n_threads, per_thread = 16, 60
    answers = {}
    lock = threading.Lock()

    def client(t):
        futures = []
        for i in range(per_thread):
            x = np.array([t, i], dtype=np.int64)
            futures.append((x, b.submit(x, priority=i % 3)))
        for x, f in futures:
            y = f.result(10)
            with lock:
                key = (int(x[0]), int(x[1]))
                assert key not in answers
                answers[key] = y

    with DynamicBatcher(fn, max_batch_size=16, max_delay_ms=1,
                        max_queue_size=n_threads * per_thread) as b:
        with concurrent.futures.ThreadPoolExecutor(n_threads) as pool:
            list(pool.map(client, range(n_threads)))
    assert len(answers) == n_threads * per_thread
    for (t, i), y in answers.items():
        assert list(y) == [i, t]
    stats = b.stats()
    assert stats["submitted"] == stats["completed"] == sum(calls) == n_threads * per_thread
    assert stats["pending"] == stats["in_flight"] == 0
    assert max(calls) > 1                               # it really batched


@pytest.mark.parametrize("kwargs, error, match", [
    ({"fn": 3}, TypeError, "fn must be callable"),
    ({"max_batch_size": 0}, ValueError, "max_batch_size must be a positive int"),
    ({"max_batch_size": 2.0}, TypeError, "max_batch_size must be an int"),
    ({"max_delay_ms": -1}, ValueError, "max_delay_ms must be in"),
    ({"max_queue_size": 0}, ValueError, "max_queue_size must be a positive int"),
    ({"preferred_batch_sizes": [4, 64]}, ValueError, r"preferred_batch_sizes must be ints in"),
    ({"preferred_batch_sizes": 4}, TypeError, "preferred_batch_sizes must be a list"),
    ({"timeout_ms": 0}, ValueError, "timeout_ms must be in"),
    ({"padding": 0}, TypeError, "padding must be a serving.Padding"),
])
def test_constructor_rejects_bad_arguments(kwargs, error, match):
    args = dict(fn=lambda x: x, max_batch_size=32)
    args.update(kwargs)
    with pytest.raises(error, match=match):
        DynamicBatcher(**args)


def test_submit_rejects_bad_samples():
    with DynamicBatcher(lambda x: x) as b:
        with pytest.raises(TypeError, match=r"submit: x\[0\] must be a Variable or an ndarray"):
            b.submit([1.0, 2.0])
        with pytest.raises(ValueError, match="x is an empty tuple"):
            b.submit(())
        with pytest.raises(TypeError, match="priority must be an int"):
            b.submit(sample(0), priority=0.5)
        with pytest.raises(ValueError, match="timeout_ms must be in"):
            b.submit(sample(0), timeout_ms=-3)
