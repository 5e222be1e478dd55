"""``gemm_team``: a large product's blocks on native worker threads give NumPy's numbers,
every layout MKL reads, and the team steps aside (the blocks then run on LeZero's Python
workers) when it is off, busy, or its worker sleeps."""
import multiprocessing
import threading
import time

import numpy as np
import pytest

from lezero.runtime import gemm, gemm_team, mkl, policy, scheduler

with policy.using(gemm="mkl"):          # float products on MKL whatever the CPU
    _AVAILABLE = gemm_team.available()
pytestmark = pytest.mark.skipif(not _AVAILABLE,
                                reason="needs Numba, the mkl wheel and the C library's usleep")


@pytest.fixture(autouse=True)
def _floats_on_mkl():
    with policy.using(gemm="mkl"):
        yield

SPLIT = dict(threads=2, small_flops=1e3, gemm_min_part_flops=1e3, gemm_min_part_rows=4)


def _done(i=0):
    return int(gemm_team._team["threads"][i][1][gemm_team.DONE])


def _ready():
    """Start the worker, or wake it when an earlier test let it fall asleep (a sleeping
    worker is not waited for), and wait until it polls with nothing left to do."""
    box = None
    for _ in range(5):
        with policy.using(**SPLIT):
            gemm.product(np.ones((64, 80), np.float32), np.ones((80, 20), np.float32))
        box = gemm_team._team["threads"][0][1]
        deadline = time.monotonic() + 10
        while box[gemm_team.DONE] != gemm_team._team["posted"][0] \
                and time.monotonic() < deadline:
            time.sleep(0.001)
        if box[gemm_team.STATE] != gemm_team.SLEEPING:
            return
    pytest.fail("the team's worker does not stay awake")


def _on_team(product):
    """``product()``'s result from a call the team's worker took a block of: one that
    ran the old way -- its worker fell asleep again in the moment between ``_ready()``
    and the call, on a loaded machine -- is made again."""
    for _ in range(5):
        _ready()
        before = _done()
        y = product()
        if _done() == before + 1:           # the worker computed one block
            return y
    pytest.fail("the team never took the product")


def _operands(rng, dtype, shape, layout):
    m, k, n = shape
    a = rng.standard_normal((m, k)).astype(dtype)
    w = rng.standard_normal((n, k)).astype(dtype)
    if layout == "a transposed":
        a = np.asfortranarray(a)
    return a, w.T                       # b: a transposed view, as Linear passes it


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(64, 90, 30), (12, 70, 200)])    # row, column blocks
@pytest.mark.parametrize("layout", ["c", "a transposed"])
def test_team_products_equal_numpy(threaded, dtype, shape, layout):
    a, b = _operands(np.random.default_rng(0), dtype, shape, layout)
    with policy.using(**SPLIT):
        how, ranges = gemm.blocks(*shape[:2], shape[2])
        assert len(ranges) == 2 and how == ("rows" if shape[0] > shape[2] else "cols")
        y = _on_team(lambda: gemm.product(a, b))
    tol = dict(rtol=2e-5, atol=2e-4) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-11)
    np.testing.assert_allclose(y, a @ b, **tol)


def test_team_writes_its_block_of_a_strided_out(threaded):
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((40, 30)).astype(np.float32), \
        rng.standard_normal((30, 50)).astype(np.float32)
    wide = np.full((40, 60), np.nan, np.float32)
    with policy.using(**SPLIT):
        gemm._into(a, b, wide[:, 5:55])
    np.testing.assert_allclose(wide[:, 5:55], a @ b, rtol=2e-5, atol=2e-4)
    assert np.isnan(wide[:, :5]).all() and np.isnan(wide[:, 55:]).all()


def test_off_busy_or_asleep_the_blocks_run_on_the_python_workers(threaded, monkeypatch):
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((64, 80)).astype(np.float32), \
        rng.standard_normal((80, 20)).astype(np.float32)
    parts = []
    real = scheduler.run_parts
    monkeypatch.setattr(gemm, "run_parts", lambda fn, n: parts.append(n) or real(fn, n))
    with policy.using(**SPLIT):
        gemm.product(a, b)
        with policy.using(gemm_team=0):                 # off
            np.testing.assert_allclose(gemm.product(a, b), a @ b, rtol=2e-5, atol=2e-4)
        assert parts == [2]
        with gemm_team._lock:                           # another thread's product
            np.testing.assert_allclose(gemm.product(a, b), a @ b, rtol=2e-5, atol=2e-4)
        assert parts == [2, 2]
        box = gemm_team._team["threads"][0][1]
        deadline = time.monotonic() + 10                # the worker falls asleep (>0.1 s)
        while box[gemm_team.STATE] != gemm_team.SLEEPING and time.monotonic() < deadline:
            time.sleep(0.05)
        assert box[gemm_team.STATE] == gemm_team.SLEEPING
        np.testing.assert_allclose(gemm.product(a, b), a @ b, rtol=2e-5, atol=2e-4)
        assert parts == [2, 2, 2]                       # not waited for, but woken:
        deadline = time.monotonic() + 10                # (it sleeps up to team_sleep_max_us)
        while box[gemm_team.DONE] != gemm_team._team["posted"][0] \
                and time.monotonic() < deadline:
            time.sleep(0.001)
        assert box[gemm_team.DONE] == gemm_team._team["posted"][0]
        np.testing.assert_allclose(gemm.product(a, b), a @ b, rtol=2e-5, atol=2e-4)
        assert parts == [2, 2, 2]                       # the next product takes the team


def _child(queue):
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((64, 80)).astype(np.float32), \
        rng.standard_normal((80, 20)).astype(np.float32)
    with policy.using(**SPLIT):
        y = gemm.product(a, b)
    queue.put((float(np.abs(y - a @ b).max()), gemm_team.workers_started()))


def test_a_forked_child_starts_its_own_worker(threaded):
    with policy.using(**SPLIT):
        gemm.product(np.ones((64, 80), np.float32), np.ones((80, 20), np.float32))
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_child, args=(queue,))
    child.start()
    error, started = queue.get(timeout=60)
    child.join(timeout=60)
    assert child.exitcode == 0 and error < 1e-3 and started == 1


def test_products_from_two_threads_at_once(threaded):
    rng = np.random.default_rng(4)
    pairs = [(rng.standard_normal((64, 90)).astype(np.float32),
              rng.standard_normal((90, 40)).astype(np.float32)) for _ in range(2)]
    errors = []

    def loop(a, b):
        for _ in range(200):
            errors.append(float(np.abs(gemm.product(a, b) - a @ b).max()))
    threads = [threading.Thread(target=loop, args=pair) for pair in pairs]
    with policy.using(**SPLIT):         # (the policy is the process's: set it once)
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert len(errors) == 400 and max(errors) < 1e-3
    assert mkl.library() is not None


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_stack_splits_over_the_team_by_matrices(threaded, dtype):
    """Matrices evenly spaced in every operand -- one leading axis, or axes of size one
    around it, or a broadcast one -- run as two ranges of matrices, one on the team."""
    rng = np.random.default_rng(5)
    w = rng.standard_normal((1, 36, 24)).astype(dtype)                     # broadcast
    x = rng.standard_normal((7, 1, 24, 30)).astype(dtype)
    tiles = rng.standard_normal((9, 36, 24)).astype(dtype)
    cols = np.ascontiguousarray(rng.standard_normal((9, 30, 24)).astype(dtype))
    tol = dict(rtol=2e-5, atol=2e-4) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-11)
    with policy.using(**SPLIT, stack_min_flops=1e3):
        for a, b in ((w, x), (tiles, cols.transpose(0, 2, 1))):
            np.testing.assert_allclose(_on_team(lambda: gemm.stacked(a, b)),
                                       np.matmul(a, b), **tol)


def test_a_stack_spaced_unevenly_stays_on_this_thread(threaded, monkeypatch):
    rng = np.random.default_rng(6)
    a = rng.standard_normal((3, 4, 20, 30)).astype(np.float32)[:, :3]      # 3x3 of 4x3 rows
    b = rng.standard_normal((30, 20)).astype(np.float32)[None, None] + np.zeros(
        (1, 3, 1, 1), np.float32)
    with policy.using(**SPLIT, stack_min_flops=1e3):
        gemm.stacked(np.ones((2, 40, 40), np.float32), np.ones((2, 40, 40), np.float32))
        before = _done()
        np.testing.assert_allclose(gemm.stacked(a, b), np.matmul(a, b), rtol=2e-5, atol=2e-4)
        assert _done() == before


def test_the_team_is_handed_only_what_mkl_reads_right(threaded, monkeypatch):
    """``gemm._on_team`` checks what the workers' raw pointers rely on: a mismatched
    shape, dtype or an out without unit column stride never reaches the team."""
    monkeypatch.setattr(gemm_team, "run", lambda *a: pytest.fail("the team was handed it"))
    a = np.ones((64, 80), np.float32)
    b = np.ones((80, 20), np.float32)
    ranges = [(0, 32), (32, 64)]
    bad = [(a, b, np.empty((64, 21), np.float32)),                 # out shape
           (a, b[:79], np.empty((64, 20), np.float32)),             # inner sizes
           (a, b.astype(np.float64), np.empty((64, 20), np.float32)),
           (a, b, np.empty((64, 20), np.float64)),
           (a, b, np.empty((64, 40), np.float32)[:, ::2]),          # no unit column stride
           (a.astype(np.int32), b.astype(np.int32), np.empty((64, 20), np.int32)),
           (np.ones((64, 160), np.float32)[:, ::2], b, np.empty((64, 20), np.float32))]
    for x, y, out in bad:
        assert gemm._on_team(True, ranges, x, y, out) is False
