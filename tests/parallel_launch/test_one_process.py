"""lezero.parallel in the normal suite: the one-process world (no mpiexec), with and
without mpi4py; the collectives as operators (lezero.testing); DataParallel and
SyncBatchNorm alone; checkpoints, timeline export, stall reports and the excepthook."""
import json
import sys

import numpy as np
import pytest

import lezero as lz
import lezero.functions as F
from lezero import nn, optim, parallel
from lezero.parallel import world as world_module
from lezero.testing import check_double_backward, check_gradient, check_torch

pytestmark = pytest.mark.timeout(60)
BACKENDS = ["local", pytest.param("mpi", marks=pytest.mark.skipif(
    not world_module._mpi.have_mpi4py(), reason="mpi4py is not installed"))]


@pytest.fixture
def fresh(monkeypatch):
    """A clean slate: no world yet, no launcher variables; restored afterwards."""
    for name in world_module._mpi._SIZE_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("LEZERO_PARALLEL_BACKEND", raising=False)
    saved = world_module._world
    world_module._world = None
    yield
    world_module._reset_for_tests()
    world_module._world = saved


@pytest.fixture(params=BACKENDS)
def comm(request, fresh):
    return parallel.init(backend=request.param, timeout=5)


# ----- the world -----------------------------------------------------------------------

def test_one_process_world_needs_no_mpi4py(fresh, monkeypatch):
    monkeypatch.setitem(sys.modules, "mpi4py", None)        # import mpi4py now fails
    world = parallel.get_world()
    assert (world.rank, world.size, world.backend) == (0, 1, "one process")
    assert parallel.get_world() is world and parallel.is_initialized()
    assert parallel.get_rank() == 0 and parallel.get_world_size() == 1


def test_several_ranks_without_mpi4py_name_the_extra(fresh, monkeypatch):
    monkeypatch.setitem(sys.modules, "mpi4py", None)
    monkeypatch.setenv("PMI_SIZE", "2")
    with pytest.raises(ImportError, match=r"pip install -e .\.\[mpi\]."):
        parallel.init()
    with pytest.raises(RuntimeError, match="launched as one of 2 ranks"):
        parallel.init(backend="local")


def test_init_checks_its_arguments(fresh):
    with pytest.raises(ValueError, match="backend must be one of"):
        parallel.init(backend="nccl")
    with pytest.raises(ValueError, match=r"timeout must be in \(0, inf\)"):
        parallel.init(timeout=0)
    with pytest.raises(TypeError, match="abort_on_exception must be a bool"):
        parallel.init(abort_on_exception="yes")


def test_failure_settings_are_checked(fresh, monkeypatch):
    with pytest.raises(TypeError, match="check_collectives must be a bool"):
        parallel.init(check_collectives="no")
    with pytest.raises(ValueError, match=r"init_timeout must be in \(0, inf\)"):
        parallel.init(init_timeout=-1)
    monkeypatch.setenv("LEZERO_INIT_TIMEOUT", "soon")
    with pytest.raises(ValueError, match="LEZERO_INIT_TIMEOUT must be a number of seconds, "
                                         "got 'soon'"):
        parallel.init()
    monkeypatch.delenv("LEZERO_INIT_TIMEOUT")
    monkeypatch.setenv("LEZERO_CHECK_COLLECTIVES", "yes")
    with pytest.raises(ValueError, match="LEZERO_CHECK_COLLECTIVES must be 0 or 1, got 'yes'"):
        parallel.init(backend="local")
    monkeypatch.setenv("LEZERO_CHECK_COLLECTIVES", "0")
    world = parallel.init(backend="local", check_collectives=None)
    assert world.check_collectives is False
    assert parallel.init(check_collectives=True).check_collectives is True
    with pytest.raises(TypeError, match="check must be a bool"):
        world.iallreduce(np.ones(2), check="off")


def test_importing_parallel_loads_no_mpi4py():
    import subprocess
    code = ("import sys, lezero.parallel, lezero.distributed; "
            "assert 'mpi4py' not in sys.modules, 'mpi4py imported'")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def test_distributed_is_the_same_module():
    import lezero.distributed as dist
    assert dist is parallel and lz.distributed is parallel
    assert parallel.DistributedDataParallel is parallel.DataParallel


def test_collectives_of_one_rank(comm):
    x = np.arange(6.0).reshape(2, 3)
    got = comm.allreduce(x, "mean")
    assert got is not x
    np.testing.assert_array_equal(got, x)
    np.testing.assert_array_equal(comm.allgather(x), x[None])
    np.testing.assert_array_equal(comm.allgather(x, axis=1), x)
    np.testing.assert_array_equal(comm.reduce_scatter(x, axis=1), x)
    np.testing.assert_array_equal(comm.alltoall(x), x)
    np.testing.assert_array_equal(comm.reduce(x), x)
    assert comm.bcast(x) is x
    assert comm.bcast_object({"a": 1}) == {"a": 1}
    assert comm.allgather_object("z") == ["z"]
    comm.barrier()
    assert comm.split(0).size == 1 and comm.split(None) is None


def test_messages_to_oneself(comm):
    early = comm.irecv(np.empty(2), source=0, tag=2)         # posted before the send
    comm.send(np.array([1.0, 2.0]), dest=0, tag=2)
    np.testing.assert_array_equal(early.wait(), [1.0, 2.0])
    if comm.backend == "one process":
        with pytest.raises(RuntimeError, match="never sent"):
            comm.recv(np.empty(2), source=0, tag=3)


def test_a_wait_past_its_timeout_reports_the_stall(comm):
    request = comm.irecv(np.empty(1), source=0, tag=4)
    with pytest.raises(parallel.CollectiveTimeoutError, match=r"stall on communicator "
                       r"'world'.*recv \(from rank 0, tag 4"):
        request.wait(timeout=0.05)
    comm.send(np.zeros(1), dest=0, tag=4)                     # let it complete
    request.wait()


# ----- the collectives as operators ----------------------------------------------------

def _torch_chunk(x):
    return x * 1


OPERATORS = {
    "all_reduce": (lambda x: parallel.all_reduce(x), _torch_chunk),
    "all_reduce_mean": (lambda x: parallel.all_reduce(x * x, "mean"), lambda x: x * x),
    "all_gather": (lambda x: parallel.all_gather(x, axis=1), _torch_chunk),
    "all_gather_stack": (lambda x: parallel.all_gather(x, axis=None), lambda x: x[None]),
    "reduce_scatter": (lambda x: parallel.reduce_scatter(x, axis=0), _torch_chunk),
    "broadcast": (lambda x: parallel.broadcast(F.sin(x)), lambda x: x.sin()),
    "copy_to_parallel_region": (lambda x: parallel.copy_to_parallel_region(x * x),
                                lambda x: x * x),
    "reduce_from_parallel_region": (lambda x: parallel.reduce_from_parallel_region(x),
                                    _torch_chunk),
    "scatter_to_parallel_region": (lambda x: parallel.scatter_to_parallel_region(x),
                                   _torch_chunk),
    "gather_from_parallel_region": (lambda x: parallel.gather_from_parallel_region(x * x),
                                    lambda x: x * x),
}


@pytest.mark.parametrize("name", sorted(OPERATORS))
def test_collective_operator_checks(comm, name):
    fn, torch_fn = OPERATORS[name]
    x = lz.testing.rand(3, 4, seed=1)
    check_gradient(fn, x)
    check_double_backward(fn, x)
    check_torch(fn, torch_fn, x.astype(np.float32))


def test_collective_operators_show_in_the_graph(comm):
    y = parallel.reduce_from_parallel_region(parallel.copy_to_parallel_region(
        lz.Variable(np.ones(2))))
    assert type(y.creator).__name__ == "ReduceFromParallelRegion"
    assert type(y.creator.inputs[0].creator).__name__ == "CopyToParallelRegion"


def test_collective_operator_errors(comm):
    with pytest.raises(ValueError, match="op must be one of 'sum', 'mean'"):
        parallel.all_reduce(np.ones(2), op="max")
    with pytest.raises(TypeError, match="x must be a Variable or an ndarray"):
        parallel.all_gather([1.0, 2.0])
    with pytest.raises(ValueError, match="axis must be <= 1"):
        parallel.gather_from_parallel_region(np.ones((2, 2)), axis=2)
    with pytest.raises(TypeError, match="comm must be a lezero.parallel Communicator"):
        parallel.all_reduce(np.ones(2), comm="world")
    with pytest.raises(ValueError, match="root must be <= 0"):
        parallel.broadcast(np.ones(2), root=1)


# ----- DataParallel alone --------------------------------------------------------------

def _mlp():
    lz.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
    for p in model.parameters():
        p.data = p.data.astype(np.float64)
    return model


def _train(model, steps=3, accumulate=False):
    opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    rng = np.random.default_rng(0)
    for _ in range(steps):
        x, t = rng.standard_normal((8, 4)), rng.integers(0, 2, 8)
        opt.zero_grad()
        if accumulate:
            with model.no_sync():
                (F.cross_entropy(model(x[:4]), t[:4]) / 2).backward()
            (F.cross_entropy(model(x[4:]), t[4:]) / 2).backward()
        else:
            F.cross_entropy(model(x), t).backward()
        opt.step()
    return model


@pytest.mark.parametrize("accumulate", [False, True])
def test_data_parallel_alone_trains_like_the_model(comm, accumulate):
    plain = _train(_mlp())
    dp = _train(parallel.DataParallel(_mlp(), comm, bucket_mb=1e-4), accumulate=accumulate)
    for (name, a), b in zip(dp.module.state_dict().items(), plain.state_dict().values()):
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-14, err_msg=name)
    # the first step is forgotten if the buckets were rebuilt after it
    assert dp.timeline().steps[-1]["step"] == 3 and len(dp.timeline()) >= 2
    assert len(dp.buckets) == 4
    assert set(dp.state_dict()) == {f"module.{k}" for k in plain.state_dict()}


def test_timeline_export_and_summary(comm, tmp_path):
    dp = _train(parallel.DataParallel(_mlp(), comm, bucket_mb=1e-4))
    path = tmp_path / "trace.json"
    dp.timeline().to_chrome_trace(str(path))
    events = json.loads(path.read_text())["traceEvents"]
    names = {e["name"] for e in events}
    assert {"forward", "backward", "wait", "all-reduce bucket 0", "bucket 3 ready"} <= names
    spans = [e for e in events if e["ph"] == "X"]
    assert all(e["dur"] >= 0 and e["ts"] >= 0 for e in spans)
    text = dp.timeline().summary()
    assert "4 buckets" in text and "steps recorded" in text and "overlapped" in text
    assert 0.0 <= dp.timeline().overlap_fraction() <= 1.0


def test_data_parallel_argument_errors(comm):
    with pytest.raises(TypeError, match="module must be an nn.Module"):
        parallel.DataParallel(lambda x: x, comm)
    with pytest.raises(ValueError, match=r"bucket_mb must be in \(0, inf\)"):
        parallel.DataParallel(_mlp(), comm, bucket_mb=0)
    with pytest.raises(TypeError, match="find_unused_parameters must be a bool"):
        parallel.DataParallel(_mlp(), comm, find_unused_parameters=1)
    with pytest.raises(ValueError, match="no parameters that require grad"):
        parallel.DataParallel(nn.ReLU(), comm)
    with pytest.raises(TypeError, match="comm must be"):
        parallel.DataParallel(_mlp(), comm=3)


def test_a_backward_that_misses_a_parameter_is_named_at_the_next_forward(comm):
    class Gate(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(2, 2), nn.Linear(2, 2)

        def forward(self, x, skip=False):
            return self.a(x) if skip else self.b(self.a(x))

    dp = parallel.DataParallel(Gate(), comm)
    dp(np.ones((1, 2), np.float32)).sum().backward()
    dp(np.ones((1, 2), np.float32), skip=True).sum().backward()      # b gets nothing
    with pytest.raises(RuntimeError, match=r"no gradient to 2 parameter.*b\.bias"):
        dp(np.ones((1, 2), np.float32))


# ----- SyncBatchNorm alone -------------------------------------------------------------

def test_sync_batchnorm_statistics_path_equals_batch_norm(comm):
    """The gathered-statistics path (what several ranks run), checked on one rank."""
    from lezero.parallel.sync_batchnorm import _sync_batch_norm
    bn = parallel.SyncBatchNorm(3)
    bn.weight.data[...] = [1.0, 2.0, 0.5]
    x = lz.testing.rand(4, 3, 2, 2, seed=3)

    def sync(v):
        return _sync_batch_norm(v, bn, comm, 0.1)

    check_gradient(sync, x)
    check_torch(sync, lambda v: __import__("torch").nn.functional.batch_norm(
        v, None, None, __import__("torch").tensor(bn.weight.data), None, True),
        x.astype(np.float32))
    ref = nn.BatchNorm2d(3)
    ref(lz.Variable(x.astype(np.float32)))
    bn.running_mean[...], bn.running_var[...] = 0, 1
    sync(lz.Variable(x.astype(np.float32)))
    np.testing.assert_allclose(bn.running_mean, ref.running_mean, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(bn.running_var, ref.running_var, rtol=1e-5, atol=1e-7)


def test_convert_sync_batchnorm_keeps_objects_and_order(comm):
    model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.Sequential(
        nn.BatchNorm1d(2, momentum=None)), nn.Linear(2, 2))
    before = list(model.named_parameters())
    stats = model[1].running_mean
    model.eval()
    converted = parallel.convert_sync_batchnorm(model)
    assert converted is model
    assert isinstance(model[1], parallel.SyncBatchNorm) and isinstance(model[2][0],
                                                                       parallel.SyncBatchNorm)
    assert model[2][0].momentum is None and not model[1].training
    assert [(n, id(p)) for n, p in model.named_parameters()] == [(n, id(p)) for n, p in before]
    assert model[1].running_mean is stats
    single = parallel.SyncBatchNorm.convert_sync_batchnorm(nn.BatchNorm2d(4))
    assert isinstance(single, parallel.SyncBatchNorm)
    with pytest.raises(TypeError, match="must be an nn.Module"):
        parallel.convert_sync_batchnorm("bn")


def test_sync_batchnorm_alone_is_batchnorm(comm):
    x = lz.testing.rand(4, 3, 5, dtype=np.float32, seed=2)
    sync, plain = parallel.SyncBatchNorm(3), nn.BatchNorm1d(3)
    np.testing.assert_allclose(sync(x).data, plain(x).data, rtol=1e-6)
    with pytest.raises(ValueError, match=r"SyncBatchNorm: expected an \(N, C, \.\.\.\)"):
        sync(np.ones(3, np.float32))


# ----- checkpoints, stall reports, the excepthook ---------------------------------------

def test_checkpoint_round_trip(comm, tmp_path):
    path = str(tmp_path / "ck.npz")
    dp = _train(parallel.DataParallel(_mlp(), comm))
    parallel.save_checkpoint(path, {"model": dp.module.state_dict(), "epoch": 2,
                                    "count": np.array(3)}, comm, rng=True)
    expect = lz.get_rng().random()
    lz.manual_seed(99)
    state = parallel.load_checkpoint(path, comm)
    assert lz.get_rng().random() == expect and state["epoch"] == 2
    assert state["count"].shape == () and state["count"] == 3
    for k, v in dp.module.state_dict().items():
        np.testing.assert_array_equal(state["model"][k], v)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        parallel.save_checkpoint(str(tmp_path / "no" / "ck.npz"), {"a": 1}, comm)
    with pytest.raises(TypeError, match="state must be dict"):
        parallel.save_checkpoint(path, [1], comm)


def test_stall_report_wording():
    from lezero.parallel.stall import describe_peer
    behind = {"rank": 1, "entered": 2, "last": "allreduce #2", "last_op": "allreduce",
              "waiting": ("recv (from rank 0, tag 9)", 3.0)}
    text, arrived = describe_peer(1, behind, 3, "allreduce", 1.0)
    assert not arrived and "has not arrived" in text and "waiting for recv" in text
    other = dict(behind, entered=3, last="barrier #3", last_op="barrier", waiting=None)
    text, arrived = describe_peer(1, other, 3, "allreduce", 1.0)
    assert not arrived and "different collective here, barrier #3" in text
    text, arrived = describe_peer(2, None, 3, "allreduce", 1.0)
    assert not arrived and "no answer within 1 s" in text
    text, arrived = describe_peer(1, dict(other, last_op="allreduce"), 3, "allreduce", 1.0)
    assert arrived


def test_excepthook_prints_the_traceback_and_aborts(capsys):
    from lezero.parallel import failure

    class FakeWorld:
        rank, size, aborted = 1, 4, None

        def abort(self, code):
            self.aborted = code

    fake = FakeWorld()
    previous = sys.excepthook
    failure.install_excepthook(fake)
    try:
        try:
            raise ValueError("boom")
        except ValueError:
            sys.excepthook(*sys.exc_info())
    finally:
        failure.uninstall_excepthook()
    assert sys.excepthook is previous and fake.aborted == 1
    err = capsys.readouterr().err
    assert "rank 1 of 4 raised an uncaught exception; aborting all 4 ranks" in err
    assert "[rank 1] ValueError: boom" in err


class _Recompute(lz.Function):
    """A checkpoint-like operator: its backward recomputes ``fn`` and runs an inner
    backward, which accumulates into (and fires the hooks of) the parameters inside."""

    def __init__(self, fn):
        self.fn = fn

    def forward(self, x):
        with lz.no_grad():
            return self.fn(lz.Variable(x)).data

    def backward(self, gy):
        x = lz.Variable(self.inputs[0].data)
        with lz.enable_grad():
            self.fn(x).backward(grad=gy)
        return x.grad


def test_a_parameter_completed_twice_in_one_backward(comm):
    """Its hook runs in the outer and in an inner backward: the bucket takes the total."""
    def run(wrap):
        lz.manual_seed(0)
        model = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 4, bias=False))
        first, shared = model[0], model[1]

        def forward(x):
            h = first(x)
            return _Recompute(shared)(h) + shared(h)
        dp = parallel.DataParallel(model, comm) if wrap else model
        x = np.ones((2, 3), np.float32)
        if wrap:
            dp(x)                                   # the first forward's check
        F.sum(forward(x) ** 2).backward()
        return [p.grad.data.copy() for p in model.parameters()], dp

    plain, _ = run(False)
    wrapped, dp = run(True)
    for a, b in zip(wrapped, plain):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    assert dp._reducer.steps == 1 and dp._reducer.rebuilt


def test_buckets_are_rebuilt_in_the_order_gradients_arrive(comm):
    class Swapped(nn.Module):
        def __init__(self):
            super().__init__()
            self.late = nn.Linear(3, 3)       # registered first, used last
            self.early = nn.Linear(3, 3)

        def forward(self, x):
            return self.late(self.early(x))

    dp = parallel.DataParallel(Swapped(), comm, bucket_mb=1e-5)       # one per bucket
    assert [b["names"][0] for b in dp.buckets][:2] == ["early.bias", "early.weight"]
    dp(np.ones((2, 3), np.float32)).sum().backward()
    arrived = [b["names"][0] for b in dp.buckets]
    assert {arrived[0], arrived[1]} == {"late.bias", "late.weight"}
    assert set(arrived[2:]) == {"early.bias", "early.weight"}
    before = dp.module.early.weight.grad.data.copy()
    dp.module.zero_grad()
    dp(np.ones((2, 3), np.float32)).sum().backward()                 # the new layout works
    np.testing.assert_array_equal(dp.module.early.weight.grad.data, before)
