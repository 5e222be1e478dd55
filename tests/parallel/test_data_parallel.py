"""DataParallel on K ranks equals one process with the whole batch (run under mpiexec).

Each rank trains its shard with DataParallel and, on the side, the one-process reference
on the global batch with the same seed; parameters (and BatchNorm running statistics)
must agree after several steps: within float32 rounding, and to 1e-12 in float64.
"""
import numpy as np
import pytest

import lezero as lz
import lezero.functions as F
from lezero import nn, optim, parallel
from tests.parallel import ddp_reference as R

pytestmark = [pytest.mark.mpi, pytest.mark.timeout(60)]


def ce(model, x, t):
    return F.cross_entropy(model(x), t)


def lm_loss(model, x, t):
    logits = model(x)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), t.reshape(-1))


@pytest.mark.parametrize("dtype,tol", [(np.float32, 2e-5), (np.float64, 1e-12)])
def test_mlp_matches_one_process(dtype, tol):
    ref, dp = R.train_pair(R.mlp, R.mlp_batch, ce, dtype=dtype)
    assert len(dp.buckets) > 1, "the test should exercise several buckets"
    R.assert_same_state(ref, dp, rtol=tol, atol=tol)


def test_mlp_with_no_sync_accumulation_matches_one_process():
    ref, dp = R.train_pair(R.mlp, R.mlp_batch, ce, dtype=np.float64, accum=2)
    R.assert_same_state(ref, dp, rtol=1e-12, atol=1e-12)


def test_cnn_with_sync_batchnorm_matches_one_process():
    ref, dp = R.train_pair(R.cnn, R.cnn_batch, ce, dtype=np.float64, sync_bn=True)
    assert any(isinstance(m, parallel.SyncBatchNorm) for m in dp.module.modules())
    R.assert_same_state(ref, dp, rtol=1e-10, atol=1e-12)   # running stats included


def test_cnn_float32_with_sync_batchnorm():
    ref, dp = R.train_pair(R.cnn, R.cnn_batch, ce, sync_bn=True, steps=2)
    R.assert_same_state(ref, dp, rtol=1e-4, atol=1e-5)


def test_lstm_matches_one_process():
    ref, dp = R.train_pair(R.LSTMClassifier, R.lstm_batch, ce, dtype=np.float64)
    R.assert_same_state(ref, dp, rtol=1e-12, atol=1e-12)


def test_gpt_mini_matches_one_process():
    """GPT-mini ties its embedding to the output head: one parameter, two uses."""
    ref, dp = R.train_pair(R.gpt, R.gpt_batch, lm_loss, dtype=np.float64, steps=2, lr=0.5)
    R.assert_same_state(ref, dp, rtol=1e-11, atol=1e-12)


def test_gpt_mini_float32_one_bucket():
    ref, dp = R.train_pair(R.gpt, R.gpt_batch, lm_loss, steps=2, lr=0.5,
                           bucket_mb=float("inf"))
    assert len(dp.buckets) == 1
    R.assert_same_state(ref, dp, rtol=1e-4, atol=2e-6)


def test_wrapping_broadcasts_rank0_parameters_and_buffers():
    comm = R.world()
    lz.manual_seed(comm.rank)                  # every rank starts different
    model = R.cnn()
    model[1].running_mean[...] = comm.rank
    dp = parallel.DataParallel(model, comm)
    lz.manual_seed(0)
    expect = R.cnn()
    for (name, p), q in zip(dp.module.named_parameters(), expect.parameters()):
        np.testing.assert_array_equal(p.data, q.data, err_msg=name)
    np.testing.assert_array_equal(model[1].running_mean, 0)


def test_averaged_gradient_with_inf_on_one_rank_is_nonfinite_everywhere():
    """What a GradScaler needs: inf on any rank makes every rank skip the step."""
    comm = R.world()
    lz.manual_seed(0)
    dp = parallel.DataParallel(nn.Linear(3, 2), comm)
    x = np.ones((2, 3), np.float32) * (np.inf if comm.rank == comm.size - 1 else 1.0)
    dp(x).sum().backward()
    assert not np.isfinite(dp.module.weight.grad.data).all(), \
        "an inf gradient on one rank must make every rank's averaged gradient non-finite"
    assert np.isfinite(dp.module.bias.grad.data).all()     # the bias never saw the inf


def test_find_unused_parameters_averages_what_was_used():
    comm = R.world()

    class Branchy(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b, self.c = nn.Linear(3, 3), nn.Linear(3, 3), nn.Linear(3, 1)

        def forward(self, x, use_b):
            return self.c(self.b(x) if use_b else self.a(x))

    lz.manual_seed(0)
    dp = parallel.DataParallel(Branchy(), comm, bucket_mb=1e-5, find_unused_parameters=True)
    x = np.full((2, 3), comm.rank + 1.0, np.float32)
    dp(x, use_b=comm.rank == 0).sum().backward()        # rank 0 uses b, the others a
    g = dp.module.c.weight.grad.data
    total = comm.allreduce(dp.module.c.weight.grad.data)
    np.testing.assert_allclose(total, comm.size * g)      # every rank holds the average
    if comm.size > 1:
        assert dp.module.a.weight.grad is not None and dp.module.b.weight.grad is not None
    dp.module.zero_grad()
    dp(x, use_b=True).sum().backward()                    # a unused on every rank
    assert dp.module.a.weight.grad is None                # stays None, as in PyTorch


def test_unused_parameter_without_the_flag_is_named():
    comm = R.world()

    class Spare(nn.Module):
        def __init__(self):
            super().__init__()
            self.used, self.spare = nn.Linear(2, 2), nn.Linear(2, 2)

        def forward(self, x):
            return self.used(x)

    dp = parallel.DataParallel(Spare(), comm)
    with pytest.raises(ValueError, match=r"spare\.weight.*find_unused_parameters=True"):
        dp(np.ones((1, 2), np.float32))


def test_timeline_records_every_bucket():
    ref, dp = R.train_pair(R.mlp, R.mlp_batch, ce, steps=3)
    tl = dp.timeline()
    assert tl.steps[-1]["step"] == 3 and len(tl) >= 2       # step 1 goes if rebuilt
    for step in tl.steps:
        assert step["first_grad"] <= step["last_ready"] <= step["end"]
        for b in step["buckets"]:
            assert b["ready"] <= b["start"] <= b["end"] <= step["end"] + 1e-9
    assert 0.0 <= tl.overlap_fraction() <= 1.0
    assert "bucket" in tl.summary() and "overlapped" in tl.summary()
    trace = tl.to_chrome_trace(comm=dp.comm)
    if dp.comm.rank == 0:
        ranks = {e["pid"] for e in trace["traceEvents"]}
        assert ranks == set(range(dp.comm.size))


def test_join_with_uneven_batches_matches_one_process():
    """Odd ranks have one batch fewer; once out of data they shadow with zeros."""
    comm = R.world()
    rng = np.random.default_rng(5)
    n_local = [3 - (r % 2) for r in range(comm.size)]       # 3, 2, 3, 2 batches
    data = [[(rng.standard_normal((2, 6)).astype(np.float64), rng.integers(0, 3, 2))
             for _ in range(n)] for n in n_local]
    lz.manual_seed(0)
    dp = parallel.DataParallel(R.to_float64(R.mlp()), comm)
    opt = optim.SGD(dp.parameters(), lr=0.1)
    with dp.join():
        for x, t in data[comm.rank]:
            opt.zero_grad()
            ce(dp, x, t).backward()
            opt.step()
    lz.manual_seed(0)
    ref = R.to_float64(R.mlp())
    ref_opt = optim.SGD(ref.parameters(), lr=0.1)
    for step in range(max(n_local)):
        ref_opt.zero_grad()
        present = [data[r][step] for r in range(comm.size) if step < n_local[r]]
        # each present rank's mean loss, divided by the world size (PyTorch's default)
        loss = sum(ce(ref, x, t) for x, t in present) / comm.size
        loss.backward()
        ref_opt.step()
    R.assert_same_state(ref, dp, rtol=1e-12, atol=1e-12)


def test_checkpoint_rank0_writes_every_rank_resumes_identically(tmp_path_factory):
    comm = R.world()
    folder = comm.bcast_object(str(tmp_path_factory.mktemp("ck")) if comm.rank == 0 else None)
    path = f"{folder}/ck.npz"
    ref, dp = R.train_pair(R.mlp, R.mlp_batch, ce, steps=2)
    opt = optim.Adam(dp.parameters(), lr=1e-2)
    ce(dp, *R.shard(R.mlp_batch(np.random.default_rng(9), np.float32), comm)).backward()
    opt.step()
    parallel.save_checkpoint(path, {"model": dp.module.state_dict(), "count": np.array(7),
                                    "opt": opt.state_dict(), "epoch": 4}, comm, rng=True)
    expect_rng = lz.get_rng().random()
    lz.manual_seed(123 + comm.rank)                       # scramble everything
    lz.manual_seed(comm.rank)
    fresh = parallel.DataParallel(R.mlp(), comm)
    fresh_opt = optim.Adam(fresh.parameters(), lr=1e-2)
    state = parallel.load_checkpoint(path, comm)
    fresh.module.load_state_dict(state["model"])
    fresh_opt.load_state_dict(state["opt"])
    assert state["epoch"] == 4 and state["count"].shape == () and state["count"] == 7
    assert lz.get_rng().random() == expect_rng             # this rank's generator restored
    R.assert_same_state(dp.module, fresh, rtol=0, atol=0)
    moments = comm.allgather(np.concatenate([s["exp_avg"].ravel()
                                             for s in fresh_opt.state.values()]))
    np.testing.assert_array_equal(moments[0], moments[-1])
