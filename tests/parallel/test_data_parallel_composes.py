"""DataParallel composed with gradient checkpointing and with autocast + GradScaler, each
equal to one process doing the same on the whole batch (run under mpiexec, and alone).

Checkpointing recomputes a segment during backward: the gradient hooks that start the
buckets' allreduce must still fire once per parameter with the complete gradient.  Under
autocast the products run in float16; GradScaler's skip decision must be the same on every
rank (an overflow on one rank skips the step everywhere).
"""
import numpy as np
import pytest

import lezero as lz
import lezero.functions as F
from lezero import amp, nn, optim, parallel
from tests.parallel import ddp_reference as R

pytestmark = [pytest.mark.mpi, pytest.mark.timeout(60)]


class CheckpointedMLP(nn.Module):
    """An MLP whose body runs as two checkpointed segments."""

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 16), nn.ReLU(),
                                  nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 3))

    def forward(self, x):
        return lz.checkpoint_sequential(self.body, 2, x)


def plain_twin(model):
    """The same layers run without checkpointing (the reference)."""
    return lambda x: model.body(x)


def test_checkpointed_model_matches_plain_one_process_in_float64():
    comm = R.world()
    lz.manual_seed(0)
    ref = R.to_float64(CheckpointedMLP())
    lz.manual_seed(0)
    dp = parallel.DataParallel(R.to_float64(CheckpointedMLP()), comm, bucket_mb=0.0005)
    assert len(dp.buckets) > 1
    opt_ref = optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    opt_dp = optim.SGD(dp.parameters(), lr=0.1, momentum=0.9)
    calls = {"n": 0}
    for p in dp.parameters():         # counts completions: once per parameter per step
        p.register_post_accumulate_grad_hook(lambda p: calls.__setitem__("n", calls["n"] + 1))
    for step in range(3):
        x, t = R.mlp_batch(np.random.default_rng(step), np.float64)
        opt_ref.zero_grad()
        F.cross_entropy(plain_twin(ref)(x), t).backward()
        opt_ref.step()
        opt_dp.zero_grad()
        xs, ts = R.shard((x, t), comm)
        F.cross_entropy(dp(xs), ts).backward()
        opt_dp.step()
    assert calls["n"] == 3 * len(list(dp.parameters()))
    R.assert_same_state(ref, dp, rtol=1e-12, atol=1e-12)


def _amp_steps(model, comm, batches, inject_inf_at=None):
    """Train with autocast(float16) + GradScaler; returns the step results."""
    opt = optim.SGD(model.parameters(), lr=0.1)
    scaler = amp.GradScaler(init_scale=2.0 ** 8, growth_interval=2)
    results = []
    for step, (x, t) in enumerate(batches):
        opt.zero_grad()
        if step == inject_inf_at and (comm is None or comm.rank == comm.size - 1):
            x = x.copy()
            x[0, 0] = np.inf              # one rank (the last) overflows
        with amp.autocast("float16"):
            loss = F.cross_entropy(model(x), t)
        scaler.scale(loss).backward()
        results.append(scaler.step(opt))
        scaler.update()
    return results, scaler.get_scale()


@pytest.mark.parametrize("inject", [None, 1])
def test_autocast_and_grad_scaler_match_one_process(inject):
    comm = R.world()
    lz.manual_seed(0)
    ref = R.mlp()
    lz.manual_seed(0)
    dp = parallel.DataParallel(R.mlp(), comm, bucket_mb=0.0005)
    batches = [R.mlp_batch(np.random.default_rng(s), np.float32) for s in range(4)]
    ref_results, ref_scale = _amp_steps(ref, None, batches, inject_inf_at=inject)
    shards = [R.shard(b, comm) for b in batches]
    dp_results, dp_scale = _amp_steps(dp, comm, shards, inject_inf_at=inject)
    assert [r.stepped for r in dp_results] == [r.stepped for r in ref_results]
    if inject is not None:
        assert not dp_results[inject].stepped, "an overflow on one rank skips every rank"
    assert dp_scale == ref_scale
    for p in dp.parameters():
        assert p.data.dtype == np.float32, "master weights stay float32"
    # float16 products summed in a different order: float16-sized tolerance
    R.assert_same_state(ref, dp, rtol=2e-3, atol=2e-3)
