"""amp.GradScaler: torch's scale sequence, skipped steps, errors, optimizers, schedulers."""
import numpy as np
import pytest
import torch

import lezero as lz
import lezero.functions as F
from lezero import amp, nn, optim

INF, NAN = float("inf"), float("nan")
# 1.0: a clean step; inf / nan: that step's gradient overflows
PATTERN = [1.0, 1.0, INF, 1.0, 1.0, 1.0, 1.0, NAN, INF, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0,
           INF, 1.0, 1.0, 1.0, NAN, 1.0, 1.0, 1.0]


def _lezero_run(pattern, **kw):
    p = lz.Parameter(np.ones(3, np.float32))
    opt = optim.SGD([p], lr=0.1)
    scaler = amp.GradScaler(**kw)
    scales, stepped = [], []
    for c in pattern:
        opt.zero_grad()
        scaler.scale((p * np.float32(c)).sum()).backward()
        stepped.append(scaler.step(opt).stepped)
        scales.append(scaler.update())
    return scales, stepped, p.data.copy(), scaler


def _torch_run(pattern, **kw):
    p = torch.nn.Parameter(torch.ones(3))
    opt = torch.optim.SGD([p], lr=0.1)
    scaler = torch.amp.GradScaler("cpu", **kw)
    scales, stepped = [], []
    for c in pattern:
        opt.zero_grad()
        before = p.detach().clone()
        scaler.scale((p * c).sum()).backward()
        scaler.step(opt)
        scaler.update()
        stepped.append(not torch.equal(before, p.detach()))
        scales.append(scaler.get_scale())
    return scales, stepped, p.detach().numpy(), scaler


@pytest.mark.parametrize("kw", [dict(init_scale=2.0 ** 16, growth_interval=3),
                                dict(init_scale=1024.0, growth_factor=4.0, backoff_factor=0.25,
                                     growth_interval=2)])
def test_scale_sequence_equals_torch_on_the_same_overflow_pattern(kw):
    ours, our_steps, our_p, scaler = _lezero_run(PATTERN, **kw)
    theirs, their_steps, their_p, tscaler = _torch_run(PATTERN, **kw)
    assert ours == theirs
    assert our_steps == their_steps == [np.isfinite(c) for c in PATTERN]
    np.testing.assert_allclose(our_p, their_p, rtol=1e-6)
    sd = tscaler.state_dict()
    assert scaler.state_dict() == {k: (v.item() if hasattr(v, "item") else v)
                                   for k, v in sd.items()}


def test_growth_stops_at_the_largest_finite_float32():
    ours, *_ = _lezero_run([1.0] * 3, init_scale=2.0 ** 127, growth_interval=1)
    theirs, *_ = _torch_run([1.0] * 3, init_scale=2.0 ** 127, growth_interval=1)
    assert ours == theirs == [2.0 ** 127] * 3


def _model():
    lz.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))


def _data():
    rng = np.random.default_rng(0)
    return lz.Variable(rng.standard_normal((5, 3)).astype(np.float32)), np.array([0, 1, 0, 1, 1])


def test_step_result_names_the_nonfinite_parameters_and_the_scales():
    model = _model()
    opt = optim.SGD(model.named_parameters(), lr=0.1)
    scaler = amp.GradScaler(init_scale=8.0)
    x, t = _data()
    w_before = model[2].weight.data.copy()
    loss = F.cross_entropy(model(x), t)
    scaler.scale(loss).backward()
    model[2].weight.grad.data[0, 0] = np.inf
    r = scaler.step(opt)
    assert not r.stepped and r.found_inf and r.nonfinite == ("2.weight",)
    assert r.scale_before == 8.0 and r.scale_after == 4.0          # what update() will do
    assert scaler.update() == 4.0 and r.scale_after == 4.0
    np.testing.assert_array_equal(model[2].weight.data, w_before)
    assert "stepped=False" in repr(r)


def test_misuse_is_a_clear_error():
    model = _model()
    opt = optim.SGD(model.parameters(), lr=0.1)
    scaler = amp.GradScaler()
    x, t = _data()
    with pytest.raises(RuntimeError, match="GradScaler.step: scale\\(\\) was not called"):
        scaler.step(opt)
    with pytest.raises(RuntimeError, match="GradScaler.unscale_: scale\\(\\) was not called"):
        scaler.unscale_(opt)
    with pytest.raises(RuntimeError, match="GradScaler.update: no step\\(\\)"):
        scaler.update()
    scaler.scale(F.cross_entropy(model(x), t)).backward()
    scaler.unscale_(opt)
    with pytest.raises(RuntimeError, match="unscale_: already called on this optimizer"):
        scaler.unscale_(opt)
    scaler.step(opt)
    with pytest.raises(RuntimeError, match="unscale_: called after step"):
        scaler.unscale_(opt)
    with pytest.raises(RuntimeError, match="step: already called"):
        scaler.step(opt)
    with pytest.raises(TypeError, match="scale: outputs must be a Variable"):
        scaler.scale(np.ones(2))
    with pytest.raises(TypeError, match="optimizer must be a lezero.optim optimizer"):
        scaler.step("sgd")


@pytest.mark.parametrize("kw, error, words", [
    (dict(init_scale=0), ValueError, "init_scale"),
    (dict(growth_factor=1.0), ValueError, "growth_factor"),
    (dict(backoff_factor=1.0), ValueError, "backoff_factor"),
    (dict(growth_interval=0), ValueError, "growth_interval"),
    (dict(growth_interval=2.5), TypeError, "growth_interval"),
    (dict(enabled=1), TypeError, "enabled"),
])
def test_constructor_arguments_are_checked(kw, error, words):
    with pytest.raises(error, match=words):
        amp.GradScaler(**kw)


def test_unscale_then_clip_sees_the_true_gradients_and_accumulation_works():
    x, t = _data()
    ref = _model()
    for _ in range(2):                                  # two accumulated micro-batches
        F.cross_entropy(ref(x), t).backward()
    model = _model()
    opt = optim.SGD(model.parameters(), lr=0.1)
    scaler = amp.GradScaler(init_scale=2.0 ** 10)
    for _ in range(2):
        scaler.scale(F.cross_entropy(model(x), t)).backward()
    scaler.unscale_(opt)
    for p, q in zip(model.parameters(), ref.parameters()):
        np.testing.assert_allclose(p.grad.data, q.grad.data, rtol=1e-6, atol=1e-7)
    norm = optim.clip_grad_norm_(model.parameters(), 0.01)
    want = np.sqrt(sum((q.grad.data.astype(np.float64) ** 2).sum() for q in ref.parameters()))
    assert float(norm) == pytest.approx(want, rel=1e-5)
    assert scaler.step(opt).stepped


OPTIMIZERS = [(optim.SGD, dict(lr=0.1, momentum=0.9)), (optim.Adam, dict(lr=0.01)),
              (optim.AdamW, dict(lr=0.01)), (optim.RMSprop, dict(lr=0.01)),
              (optim.Adagrad, dict(lr=0.1)), (optim.Adadelta, dict(lr=1.0)),
              (optim.Adamax, dict(lr=0.01)), (optim.NAdam, dict(lr=0.01)),
              (optim.Lion, dict(lr=0.001))]


@pytest.mark.parametrize("cls, kw", OPTIMIZERS, ids=lambda v: getattr(v, "__name__", ""))
def test_every_optimizer_steps_as_without_a_scaler_and_skips_cleanly(cls, kw):
    x, t = _data()
    plain, scaled = _model(), _model()
    opt_a, opt_b = cls(plain.parameters(), **kw), cls(scaled.parameters(), **kw)
    scaler = amp.GradScaler(init_scale=2.0 ** 12)
    for step in range(3):
        opt_a.zero_grad()
        opt_b.zero_grad()
        F.cross_entropy(plain(x), t).backward()
        scaler.scale(F.cross_entropy(scaled(x), t)).backward()
        if step == 1:                                      # an overflow: skipped
            scaled[0].bias.grad.data[:] = np.nan
            before = [p.data.copy() for p in scaled.parameters()]
            assert not scaler.step(opt_b).stepped
            assert all(np.array_equal(b, p.data) for b, p in zip(before, scaled.parameters()))
        else:
            opt_a.step()
            assert scaler.step(opt_b).stepped
        scaler.update()
    for p, q in zip(plain.parameters(), scaled.parameters()):
        np.testing.assert_allclose(p.data, q.data, rtol=1e-5, atol=1e-6)


def test_a_scheduler_steps_only_with_the_optimizer():
    model = _model()
    opt = optim.SGD(model.parameters(), lr=1.0)
    sched = optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    scaler = amp.GradScaler()
    x, t = _data()
    for c in (1.0, INF, 1.0):
        opt.zero_grad()
        scaler.scale(F.cross_entropy(model(x), t) * np.float32(c)).backward()
        scaler.step(opt, scheduler=sched)
        scaler.update()
    assert opt.param_groups[0]["lr"] == 0.25            # two real steps, not three


def test_state_dict_round_trip_and_torch_state_dicts_load():
    *_, scaler = _lezero_run(PATTERN[:5], growth_interval=3)
    fresh = amp.GradScaler()
    fresh.load_state_dict(scaler.state_dict())
    assert fresh.state_dict() == scaler.state_dict()
    *_, tscaler = _torch_run(PATTERN[:5], growth_interval=3)
    fresh.load_state_dict(tscaler.state_dict())
    assert fresh.get_scale() == tscaler.get_scale()
    with pytest.raises(ValueError, match="missing keys"):
        fresh.load_state_dict({"scale": 1.0})
    with pytest.raises(ValueError, match="empty"):
        fresh.load_state_dict({})


def test_disabled_scaler_is_a_pass_through():
    model = _model()
    opt = optim.SGD(model.parameters(), lr=0.1)
    scaler = amp.GradScaler(enabled=False)
    x, t = _data()
    loss = F.cross_entropy(model(x), t)
    assert scaler.scale(loss) is loss
    loss.backward()
    r = scaler.step(opt)
    assert r.stepped and r.scale_before == r.scale_after == 1.0
    assert scaler.get_scale() == 1.0 and scaler.state_dict() == {}


def test_float16_loss_is_scaled_in_float32_and_float16_gradients_are_refused():
    p = lz.Parameter(np.ones(2, np.float16))
    scaler = amp.GradScaler()
    scaled = scaler.scale((p * p).sum())
    assert scaled.dtype == np.float32 and np.isfinite(scaled.data)
    scaled.backward()
    with pytest.raises(ValueError, match="float16 gradient"):
        scaler.step(optim.SGD([p], lr=0.1))
