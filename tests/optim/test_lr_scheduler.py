"""Every scheduler's learning-rate sequence against torch.optim.lr_scheduler."""
import math
import warnings

import numpy as np
import pytest
import torch

import lezero as lz
from lezero import optim
from lezero.optim import lr_scheduler as lrs

EPOCHS = 30


def optimizers(kind="SGD", lrs_=(0.1, 0.02), **kwargs):
    """A LeZero and a PyTorch optimizer with two param groups."""
    lz_groups = [{"params": [lz.Parameter(np.zeros(1))], "lr": lr} for lr in lrs_]
    t_groups = [{"params": [torch.nn.Parameter(torch.zeros(1))], "lr": lr} for lr in lrs_]
    return getattr(optim, kind)(lz_groups, **kwargs), getattr(torch.optim, kind)(t_groups, **kwargs)


def trace(opt, sched, epochs, metrics=None, keys=("lr",)):
    """The rates (and any other tracked group keys) after construction and each step."""
    out = [[g[k] for g in opt.param_groups for k in keys]]
    for e in range(epochs):
        opt.step()
        sched.step() if metrics is None else sched.step(metrics[e])
        out.append([g[k] for g in opt.param_groups for k in keys])
        if keys == ("lr",):
            assert sched.get_last_lr() == out[-1][:len(opt.param_groups)]
    return out


def both(make, kind="SGD", epochs=EPOCHS, metrics=None, keys=("lr",), **opt_kwargs):
    lz_opt, t_opt = optimizers(kind, **opt_kwargs)
    a = trace(lz_opt, make(lrs, lz_opt), epochs, metrics, keys)
    b = trace(t_opt, make(torch.optim.lr_scheduler, t_opt), epochs, metrics, keys)
    return a, b


def assert_close(a, b):
    flat = lambda seq: np.array([[x for v in row for x in (v if isinstance(v, tuple) else [v])]
                                 for row in seq], dtype=np.float64)
    np.testing.assert_allclose(flat(a), flat(b), rtol=1e-12, atol=1e-15)


CASES = {
    "StepLR": lambda m, o: m.StepLR(o, step_size=4, gamma=0.5),
    "MultiStepLR": lambda m, o: m.MultiStepLR(o, milestones=[3, 7, 7, 20], gamma=0.3),
    "ExponentialLR": lambda m, o: m.ExponentialLR(o, gamma=0.9),
    "CosineAnnealingLR": lambda m, o: m.CosineAnnealingLR(o, T_max=8, eta_min=0.001),
    "LambdaLR": lambda m, o: m.LambdaLR(o, lambda e: 1.0 / (1 + e)),
    "LambdaLR-per-group": lambda m, o: m.LambdaLR(o, [lambda e: 0.9 ** e,
                                                      lambda e: 1 + (e % 3)]),
    "LinearLR": lambda m, o: m.LinearLR(o, start_factor=0.25, end_factor=0.9, total_iters=6),
    "SequentialLR": lambda m, o: m.SequentialLR(
        o, [m.LinearLR(o, start_factor=0.1, total_iters=5), m.CosineAnnealingLR(o, T_max=10)],
        milestones=[5]),
    "SequentialLR-3": lambda m, o: m.SequentialLR(
        o, [m.ExponentialLR(o, gamma=0.8), m.StepLR(o, step_size=2),
            m.LinearLR(o, start_factor=0.5, total_iters=4)], milestones=[4, 11]),
    "OneCycleLR-cos": lambda m, o: m.OneCycleLR(o, max_lr=[0.5, 1.0], total_steps=EPOCHS),
    "OneCycleLR-linear-3phase": lambda m, o: m.OneCycleLR(
        o, max_lr=0.3, epochs=5, steps_per_epoch=6, pct_start=0.25, anneal_strategy="linear",
        three_phase=True, div_factor=10.0, final_div_factor=100.0),
}


@pytest.mark.parametrize("name", list(CASES))
def test_lr_sequence_matches_torch(name):
    kwargs = dict(momentum=0.9) if name.startswith("OneCycle") else {}
    keys = ("lr", "momentum") if name.startswith("OneCycle") else ("lr",)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # torch's SequentialLR warns about step order
        a, b = both(CASES[name], keys=keys, **kwargs)
    assert len({tuple(r) for r in a}) > 2, "the schedule changes the rate"
    assert_close(a, b)


def test_one_cycle_cycles_adam_beta1():
    make = lambda m, o: m.OneCycleLR(o, max_lr=0.01, total_steps=20, base_momentum=0.8,
                                     max_momentum=0.9)
    a, b = both(make, kind="Adam", epochs=20, keys=("lr", "betas"))
    assert_close(a, b)
    assert a[0][1] == (0.9, 0.999) and min(r[1][0] for r in a) == pytest.approx(0.8)


def test_one_cycle_refuses_extra_steps():
    opt, _ = optimizers(momentum=0.9)
    sched = lrs.OneCycleLR(opt, max_lr=0.1, total_steps=3)
    for _ in range(3):
        sched.step()
    with pytest.raises(ValueError, match="stepped 4 times, but total_steps is 3"):
        sched.step()


def test_chained_schedulers_match_torch():
    """Two schedulers on one optimizer compose through the groups' current rate."""
    def make(m, o):
        first, second = m.StepLR(o, step_size=3, gamma=0.5), m.ExponentialLR(o, gamma=0.95)

        class Both:
            def step(self):
                first.step()
                second.step()

            def get_last_lr(self):
                return second.get_last_lr()
        return Both()
    a, b = both(make)
    assert_close(a, b)


@pytest.mark.parametrize("kwargs", [
    dict(),
    dict(mode="max", factor=0.5, patience=2, threshold=0.1, threshold_mode="abs"),
    dict(patience=1, cooldown=2, min_lr=[0.05, 0.001], factor=0.2),
    dict(patience=0, eps=0.05),
])
def test_reduce_on_plateau_matches_torch(kwargs):
    rng = np.random.default_rng(0)
    metrics = list(1.0 + 0.1 * rng.standard_normal(EPOCHS))
    metrics[5:15] = [0.5] * 10          # a plateau
    make = lambda m, o: m.ReduceLROnPlateau(o, **kwargs)
    a, b = both(make, metrics=metrics)
    assert_close(a, b)
    assert a[-1] != a[0]


def test_cosine_resumed_mid_schedule_matches_torch():
    """last_epoch > -1 (resuming with initial_lr present) takes the closed form."""
    lz_opt, t_opt = optimizers()
    for opt in (lz_opt, t_opt):
        for g in opt.param_groups:
            g["initial_lr"] = g["lr"]
    a = trace(lz_opt, lrs.CosineAnnealingLR(lz_opt, T_max=10, last_epoch=4), 8)
    b = trace(t_opt, torch.optim.lr_scheduler.CosineAnnealingLR(t_opt, T_max=10, last_epoch=4), 8)
    assert_close(a, b)


def test_step_with_epoch_uses_closed_form():
    opt, _ = optimizers()
    sched = lrs.StepLR(opt, step_size=2, gamma=0.1)
    with pytest.warns(UserWarning, match="deprecated"):
        sched.step(5)
    assert sched.get_last_lr() == pytest.approx([0.1 * 0.01, 0.02 * 0.01])


def test_state_dict_round_trip_through_file(tmp_path):
    """Stop at epoch 7, save, rebuild, load, continue: the same rates as uninterrupted."""
    def build():
        opt, _ = optimizers()
        return opt, lrs.SequentialLR(opt, [lrs.LinearLR(opt, start_factor=0.2, total_iters=4),
                                           lrs.CosineAnnealingLR(opt, T_max=12)],
                                     milestones=[4])
    opt, sched = build()
    full = trace(opt, sched, 20)
    opt, sched = build()
    trace(opt, sched, 7)
    lz.save({"opt": opt.state_dict(), "sched": sched.state_dict()}, tmp_path / "s.safetensors")
    ck = lz.load(tmp_path / "s.safetensors")
    opt2, sched2 = build()
    opt2.load_state_dict(ck["opt"])
    sched2.load_state_dict(ck["sched"])
    rest = trace(opt2, sched2, 13)
    assert rest == full[7:]


def test_lambda_state_dict_keeps_callable_objects_state():
    class Warmup:
        def __init__(self):
            self.scale = 2.0

        def __call__(self, epoch):
            return self.scale * (epoch + 1)

    opt, _ = optimizers()
    fn = Warmup()
    sched = lrs.LambdaLR(opt, [fn, lambda e: 1.0])
    sd = sched.state_dict()
    assert sd["lr_lambdas"] == [{"scale": 2.0}, None]
    fn2 = Warmup()
    fn2.scale = 5.0
    sched2 = lrs.LambdaLR(opt, [fn2, lambda e: 1.0])
    sched2.load_state_dict(sd)
    assert fn2.scale == 2.0 and sched2.last_epoch == sched.last_epoch


def test_errors_name_the_argument():
    opt, _ = optimizers()
    with pytest.raises(TypeError, match="expected a lezero.optim.Optimizer, got SGD"):
        lrs.StepLR(torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))]), step_size=1)
    with pytest.raises(ValueError, match="step_size must be a positive int, got 0"):
        lrs.StepLR(opt, step_size=0)
    with pytest.raises(ValueError, match="start_factor must be in .0, 1., got 0"):
        lrs.LinearLR(opt, start_factor=0)
    with pytest.raises(ValueError, match="factor must be < 1.0, got 1.5"):
        lrs.ReduceLROnPlateau(opt, factor=1.5)
    with pytest.raises(ValueError, match="expected 2 values"):
        lrs.LambdaLR(opt, [lambda e: 1.0])
    with pytest.raises(KeyError, match="param group 0 has no 'initial_lr'"):
        lrs.ExponentialLR(optimizers()[0], gamma=0.5, last_epoch=3)
    with pytest.raises(ValueError, match="cycle_momentum=True needs"):
        lrs.OneCycleLR(optim.Adagrad([lz.Parameter(np.zeros(1))]), max_lr=0.1, total_steps=5)
    with pytest.raises(ValueError, match="2 schedulers need 1 milestones"):
        lrs.SequentialLR(opt, [lrs.StepLR(opt, 2), lrs.StepLR(opt, 3)], milestones=[])
    assert math.isclose(opt.param_groups[0]["lr"], 0.1)
