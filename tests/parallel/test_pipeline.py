"""Pipeline parallelism under mpiexec: GPipe, 1F1B and interleaved 1F1B give every stage
the single-process gradients for the same global batch (float64, to rounding); stages
cut from a Sequential or given as modules; inference; the measured timeline; a loss
scaler's overflow seen by every rank; recomputation per stage when lz.checkpoint exists."""
import numpy as np
import pytest

import lezero as lz
import lezero.functions as F
from lezero import nn, optim, parallel
from tests.parallel.tp_reference import (agree, agree_all_close, agree_close, seeded,
                                         to_float64, world)

pytestmark = [pytest.mark.mpi, pytest.mark.timeout(60)]
BATCH = 8


def mlp():
    return nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 8), nn.Tanh(),
                         nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 8), nn.Tanh(),
                         nn.Linear(8, 3))


def batch(seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((BATCH, 5)), rng.integers(0, 3, BATCH)


def reference_grads(model, x, t):
    loss = F.cross_entropy(model(x), t)
    loss.backward()
    grads = {n: p.grad.data.copy() for n, p in model.named_parameters()}
    model.zero_grad()
    return float(loss.data), grads


def compare(pipe, ref_grads, scale=1.0):
    agree_all_close([(name, p.grad.data, scale * ref_grads[name])
                     for name, p in pipe.named_model_parameters()], what="gradients")


@pytest.mark.parametrize("schedule,chunks,micro", [("gpipe", 1, 4), ("1f1b", 1, 4),
                                                   ("1f1b", 1, 2), ("interleaved", 2, 4)])
def test_pipeline_gradients_equal_one_process(schedule, chunks, micro):
    comm = world()
    if chunks * comm.size > 9:
        pytest.skip("the MLP has 9 layers")
    model = to_float64(seeded(mlp))
    x, t = batch()
    ref_loss, ref = reference_grads(model, x, t)
    pipe = parallel.Pipeline(model, comm, micro_batches=micro, schedule=schedule,
                             chunks=chunks)
    loss = pipe.step(x, t, F.cross_entropy)
    agree_close(loss, ref_loss, what="loss")
    compare(pipe, ref)
    covered = comm.allgather_object(sorted(n for n, _ in pipe.named_model_parameters()))
    agree(sorted(sum(covered, [])) == sorted(ref), "every parameter on exactly one rank")


def test_stages_given_as_modules_and_several_steps():
    comm = world()
    full = to_float64(seeded(mlp))
    layers = list(full._modules.values())
    cut = np.linspace(0, len(layers), comm.size + 1).round().astype(int)
    stages = [nn.Sequential(*layers[a:b]) for a, b in zip(cut[:-1], cut[1:])]
    ref = to_float64(seeded(mlp))
    pipe = parallel.Pipeline(stages, comm, micro_batches=4, schedule="1f1b",
                             loss_fn=F.cross_entropy)
    opt_ref = optim.SGD(ref.parameters(), lr=0.5, momentum=0.9)
    opt = optim.SGD(pipe.parameters(), lr=0.5, momentum=0.9)
    for step in range(3):
        x, t = batch(step)
        opt_ref.zero_grad()
        ref_loss = F.cross_entropy(ref(x), t)
        ref_loss.backward()
        opt_ref.step()
        opt.zero_grad()
        agree_close(pipe.step(x, t), float(ref_loss.data), what=f"loss at step {step}")
        opt.step()
    ref_layers = list(ref._modules.values())
    mine = cut[comm.rank]
    agree_all_close([(f"layer {mine + i} {n}", p.data, q.data)
                     for i, stage_layer in enumerate(stages[comm.rank]._modules.values())
                     for (n, p), q in zip(stage_layer.named_parameters(),
                                          ref_layers[mine + i].parameters())],
                    what="parameters after 3 steps")


def test_inference_and_measured_timeline(tmp_path):
    comm = world()
    model = to_float64(seeded(mlp))
    x, t = batch()
    pipe = parallel.Pipeline(model, comm, micro_batches=4, schedule="gpipe")
    out = pipe(x)
    last = comm.size - 1
    if comm.rank == last:
        np.testing.assert_allclose(out.data, model(x).data, rtol=1e-12)
    agree((out is None) == (comm.rank != last), "output only on the last stage")
    pipe.step(x, t, F.cross_entropy)
    measured = pipe.measured_timeline()
    agree(len(measured.times) == len(pipe.schedule.ops), "every op timed")
    agree(0.0 <= measured.bubble < 1.0 and measured.measured, "a bubble fraction")
    if comm.rank == 0:
        parallel.plot_timeline(measured, tmp_path / "measured.png")
        assert (tmp_path / "measured.png").stat().st_size > 1000
        assert "measured bubble" in parallel.timeline_text(measured, quantum=measured.makespan / 40)


class FakeScaler:
    """A loss scaler's ``scale`` (what Pipeline uses of amp.GradScaler)."""

    def scale(self, loss):
        return loss * 4.0


def test_loss_scaler_and_overflow_seen_everywhere():
    comm = world()
    model = to_float64(seeded(mlp))
    x, t = batch()
    _, ref = reference_grads(model, x, t)
    pipe = parallel.Pipeline(model, comm, micro_batches=2, schedule="1f1b")
    pipe.step(x, t, F.cross_entropy, scaler=FakeScaler())
    compare(pipe, ref, scale=4.0)
    params = [p for _, p in pipe.named_model_parameters()]
    if comm.rank == comm.size - 1:
        params[-1].grad.data[...] = np.inf                 # overflow on one rank only
    assert parallel.agree_on_nonfinite(params, comm)
    agree(any(not np.isfinite(p.grad.data).all() for p in params), "every rank sees it")


def test_checkpointed_stages_equal_plain():
    pytest.importorskip("lezero.checkpoint", reason="lz.checkpoint is not merged yet")
    comm = world()
    model = to_float64(seeded(mlp))
    x, t = batch()
    _, ref = reference_grads(model, x, t)
    pipe = parallel.Pipeline(model, comm, micro_batches=4, schedule="1f1b", checkpoint=True)
    pipe.step(x, t, F.cross_entropy)
    compare(pipe, ref)


def test_data_parallel_pipelines_average_gradients():
    comm = world()
    if comm.size < 4:
        pytest.skip("two pipelines of two stages need 4 ranks")
    grid = parallel.Grid(2, comm.size // 4, 2)
    try:
        model = to_float64(seeded(mlp))
        x, t = batch()
        _, ref = reference_grads(model, x, t)
        half = BATCH // 2
        d = grid.coord.dp
        pipe = parallel.Pipeline(model, micro_batches=2, dp_comm=grid.dp_comm)
        assert pipe.comm is grid.pp_comm                   # comm=None: the grid's pipeline group
        pipe.step(x[d * half:(d + 1) * half], t[d * half:(d + 1) * half], F.cross_entropy)
        compare(pipe, ref)
    finally:
        parallel.set_grid(None)


def test_a_schedule_that_does_not_fit_is_refused():
    comm = world()
    bad = parallel.one_f_one_b(comm.size + 1, 4)
    with pytest.raises(ValueError, match="the schedule is for"):
        parallel.Pipeline(mlp(), comm, micro_batches=4, schedule=bad)
    with pytest.raises(ValueError, match="does not divide into 4 equal micro-batches"):
        parallel.Pipeline(mlp(), comm, micro_batches=4).step(np.zeros((6, 5)),
                                                             np.zeros(6, np.int64),
                                                             F.cross_entropy)
    lz.manual_seed(0)


def test_autocast_and_grad_scaler_across_stages():
    amp = pytest.importorskip("lezero.amp", reason="lezero.amp is not merged yet")
    comm = world()
    ref, model = seeded(mlp), seeded(mlp)                     # float32
    pipe = parallel.Pipeline(model, comm, micro_batches=2, schedule="1f1b")
    opt_ref = optim.SGD(ref.parameters(), lr=0.5)
    opt = optim.SGD(pipe.parameters(), lr=0.5)
    scaler_ref, scaler = amp.GradScaler(init_scale=256.0), amp.GradScaler(init_scale=256.0)
    for step in range(2):
        x, t = batch(step)
        x = x.astype(np.float32)
        opt_ref.zero_grad()
        with amp.autocast():
            loss = F.cross_entropy(ref(x), t)
        scaler_ref.scale(loss).backward()
        scaler_ref.step(opt_ref)
        scaler_ref.update()
        opt.zero_grad()
        with amp.autocast():
            got = pipe.step(x, t, F.cross_entropy, scaler=scaler)
        assert scaler.step(opt).stepped
        scaler.update()
        agree_close(got, float(loss.data), rtol=2e-3, atol=1e-3, what="float16 loss")
    names = dict(ref.named_parameters())
    agree_all_close([(n, p.data, names[n].data) for n, p in pipe.named_model_parameters()],
                    rtol=1e-2, atol=2e-3, what="parameters after 2 mixed-precision steps")
    sent = {o.label() for o, _, _ in pipe.events}
    agree(len(sent) == 4, "the schedule ran")
