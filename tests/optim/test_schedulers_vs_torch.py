"""The schedulers against torch.optim.lr_scheduler, beyond test_lr_scheduler.py's table:
every attribute both state dicts hold compared after each step (counters, best, cooldown),
ReduceLROnPlateau in all its modes and boundaries, OneCycleLR bit for bit, the defaults,
resuming at ``last_epoch``, ``step(epoch)``'s closed forms and state_dict round trips."""
import warnings
from collections import Counter

import numpy as np
import pytest
import torch

import lezero as lz
from lezero.optim import lr_scheduler as lrs
from tests.optim.test_lr_scheduler import CASES, optimizers, trace

TLRS = torch.optim.lr_scheduler


def assert_same_state(ours, theirs):
    """Every entry of both state dicts but the nested ones: equal (numbers to rounding)."""
    a, b = ours.state_dict(), theirs.state_dict()
    shared = set(a) & set(b) - {"lr_lambdas", "_schedulers", "_milestones"}
    assert "_last_lr" in shared and "last_epoch" in shared
    for key in sorted(shared):
        if isinstance(b[key], Counter):              # MultiStepLR's milestones
            b[key] = sorted(b[key].elements())
        if isinstance(b[key], (bool, str)) or b[key] is None or a[key] is None:
            assert a[key] == b[key], key
        else:
            np.testing.assert_allclose(a[key], b[key], rtol=1e-12, atol=0, err_msg=key)


def group_values(opt, keys):
    return [g[k] for g in opt.param_groups for k in keys]


def run_both(make, steps, kind="SGD", metrics=None, keys=("lr",), exact=False, **opt_kwargs):
    """Build the scheduler on a LeZero and a torch optimizer, step both, and compare the
    group values and the state after construction and after every step."""
    lz_opt, t_opt = optimizers(kind, **opt_kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")       # torch's warnings about the order of steps
        ours, theirs = make(lrs, lz_opt), make(TLRS, t_opt)
        for e in range(steps + 1):
            if e:
                lz_opt.step()
                t_opt.step()
                args = () if metrics is None else (metrics[e - 1],)
                ours.step(*args)
                theirs.step(*args)
            a, b = group_values(lz_opt, keys), group_values(t_opt, keys)
            if exact:
                assert a == b, (e, a, b)
            else:
                np.testing.assert_allclose(np.array(a, float), np.array(b, float), rtol=1e-12)
            assert ours.get_last_lr() == pytest.approx(theirs.get_last_lr(), rel=1e-12)
            assert_same_state(ours, theirs)
    return ours, lz_opt


# ----- ReduceLROnPlateau ---------------------------------------------------------------

# A falling metric with repeats (equal to the best: not an improvement) and small gains
# that pass an absolute threshold but not a relative one; FALLING for mode='min',
# RISING (10 (3 - m), from 10 to 18: steps of 0.1 pass an absolute threshold of 0.03, not a
# relative one) for mode='max'.
FALLING = [2.0, 1.9, 1.85, 1.85, 1.84, 1.7, 1.7, 1.7, 1.69, 1.5, 1.5, 1.5, 1.5, 1.45, 1.3,
           1.3, 1.29, 1.29, 1.2, 1.2]
RISING = [10 * (3.0 - m) for m in FALLING]


@pytest.mark.parametrize("threshold", [0.0, 0.03])
@pytest.mark.parametrize("threshold_mode", ["rel", "abs"])
@pytest.mark.parametrize("mode", ["min", "max"])
def test_plateau_modes_match_torch_step_by_step(mode, threshold_mode, threshold):
    metrics = FALLING if mode == "min" else RISING
    make = lambda m, o: m.ReduceLROnPlateau(o, mode=mode, threshold_mode=threshold_mode,
                                            threshold=threshold, patience=1, factor=0.5)
    ours, opt = run_both(make, len(metrics), metrics=metrics)
    assert opt.param_groups[0]["lr"] < 0.1         # it did reduce


@pytest.mark.parametrize("kwargs,lrs_", [
    (dict(patience=0, cooldown=2, factor=0.5), (0.1, 0.02)),
    (dict(patience=2, cooldown=1), (0.1, 0.02)),
    (dict(patience=0, factor=0.2, min_lr=[0.05, 0.001]), (0.1, 0.02)),
    (dict(patience=0, factor=0.5, min_lr=0.03), (0.1, 0.02)),
    # 0.5 -> 0.25 changes by exactly eps: kept (only a change larger than eps is made)
    (dict(patience=0, factor=0.5, eps=0.25), (0.5, 1.0)),
    (dict(patience=0, factor=0.5, eps=1e-6), (1e-6, 0.1)),
], ids=["cooldown", "patience-cooldown", "min_lr-list", "min_lr", "eps-boundary", "eps-tiny"])
def test_plateau_counters_floors_and_eps_match_torch(kwargs, lrs_):
    metrics = [1.0] * 12
    run_both(lambda m, o: m.ReduceLROnPlateau(o, **kwargs), len(metrics), metrics=metrics,
             lrs_=lrs_)


def test_plateau_step_with_epoch_sets_last_epoch_as_torch():
    lz_opt, t_opt = optimizers()
    ours, theirs = lrs.ReduceLROnPlateau(lz_opt), TLRS.ReduceLROnPlateau(t_opt)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for sched in (ours, theirs):
            sched.step(1.0, epoch=7)
            sched.step(0.5)
    assert ours.last_epoch == theirs.last_epoch == 8
    assert_same_state(ours, theirs)


def _add_group(opt, lr):
    param = lz.Parameter(np.zeros(1)) if isinstance(opt, lz.optim.Optimizer) else \
        torch.nn.Parameter(torch.zeros(1))
    opt.add_param_group({"params": [param], "lr": lr})


def test_plateau_gives_a_group_added_later_the_scalar_min_lr_as_torch():
    lz_opt, t_opt = optimizers(lrs_=(0.1,))
    ours = lrs.ReduceLROnPlateau(lz_opt, patience=0, min_lr=0.015)
    theirs = TLRS.ReduceLROnPlateau(t_opt, patience=0, min_lr=0.015)
    for opt in (lz_opt, t_opt):
        _add_group(opt, 0.03)
    for metric in (1.0, 1.0, 1.0):
        ours.step(metric)
        theirs.step(metric)
    assert group_values(lz_opt, ("lr",)) == pytest.approx(group_values(t_opt, ("lr",)))
    assert lz_opt.param_groups[1]["lr"] == 0.015 and ours.min_lrs == [0.015] * 2


def test_plateau_with_a_min_lr_list_refuses_a_group_added_later():
    opt, _ = optimizers()
    sched = lrs.ReduceLROnPlateau(opt, patience=0, min_lr=[0.01, 0.001])
    _add_group(opt, 0.03)
    sched.step(1.0)
    with pytest.raises(RuntimeError, match=r"^ReduceLROnPlateau: the optimizer now has 3 "
                                           r"param groups but min_lr lists 2$"):
        sched.step(1.0)


# ----- OneCycleLR, bit for bit -------------------------------------------------------------

ONE_CYCLE = {
    # the warm-up ends exactly on step 4: both neighbouring phases give max_lr there
    "cos": (dict(max_lr=0.3, total_steps=20, pct_start=0.25), 19),
    "linear-3phase": (dict(max_lr=[0.3, 0.7], total_steps=20, pct_start=0.25,
                           anneal_strategy="linear", three_phase=True,
                           base_momentum=[0.8, 0.7], max_momentum=[0.9, 0.95]), 19),
    "no-warm-up": (dict(max_lr=0.3, total_steps=10, pct_start=0.0), 10),
    "all-warm-up": (dict(max_lr=0.3, total_steps=10, pct_start=1.0), 9),
    "one-step": (dict(max_lr=0.3, total_steps=1), 0),
    "one-epoch-of-one": (dict(max_lr=0.3, epochs=1, steps_per_epoch=1), 0),
    "epochs": (dict(max_lr=0.3, epochs=3, steps_per_epoch=4, div_factor=5.0,
                    final_div_factor=50.0), 12),
}


@pytest.mark.parametrize("name", list(ONE_CYCLE))
def test_one_cycle_matches_torch_exactly(name):
    kwargs, steps = ONE_CYCLE[name]
    run_both(lambda m, o: m.OneCycleLR(o, **kwargs), steps, keys=("lr", "momentum"),
             exact=True, momentum=0.9)


def test_one_cycle_cycles_adams_beta1_exactly():
    make = lambda m, o: m.OneCycleLR(o, max_lr=0.01, total_steps=12, base_momentum=0.8)
    run_both(make, 12, kind="Adam", keys=("lr", "betas"), exact=True)


def test_one_cycle_resumes_from_the_groups_as_torch():
    """last_epoch=k takes initial_lr, max_lr, min_lr and the momenta from the groups."""
    def make(m, o):
        first = m.OneCycleLR(o, max_lr=0.5, total_steps=16)
        for _ in range(5):
            first.step()
        return m.OneCycleLR(o, max_lr=123.0, total_steps=16, last_epoch=5)
    run_both(make, 10, keys=("lr", "momentum"), momentum=0.9)


# ----- the other schedulers -------------------------------------------------------------

DEFAULTS = {
    "StepLR": lambda m, o: m.StepLR(o, 3),
    "MultiStepLR": lambda m, o: m.MultiStepLR(o, [2, 4]),
    "LinearLR": lambda m, o: m.LinearLR(o),
    "LinearLR-bounds": lambda m, o: m.LinearLR(o, start_factor=1.0, end_factor=0.0,
                                               total_iters=3),
    "LinearLR-no-iters": lambda m, o: m.LinearLR(o, start_factor=0.5, total_iters=0),
    "CosineAnnealingLR": lambda m, o: m.CosineAnnealingLR(o, 5),
    "CosineAnnealingLR-T_max-1": lambda m, o: m.CosineAnnealingLR(o, 1, eta_min=0.01),
    "OneCycleLR": lambda m, o: m.OneCycleLR(o, 0.5, 12),
    "SequentialLR-milestone-1": lambda m, o: m.SequentialLR(
        o, [m.LinearLR(o, 0.5, total_iters=2), m.ExponentialLR(o, 0.5)], [1]),
    "SequentialLR-nested": lambda m, o: m.SequentialLR(
        o, [m.SequentialLR(o, [m.LinearLR(o, 0.5, total_iters=3), m.ExponentialLR(o, 0.8)],
                           [3]),
            m.StepLR(o, 2, gamma=0.5)], [6]),
}


@pytest.mark.parametrize("name", list(DEFAULTS))
def test_defaults_and_edge_settings_match_torch(name):
    kwargs = dict(momentum=0.9) if name.startswith("OneCycle") else {}
    ours, _ = run_both(DEFAULTS[name], 12, **kwargs)
    if name.startswith("Sequential"):
        assert ours.optimizer is ours._schedulers[0].optimizer


RESUMABLE = {
    "StepLR": lambda m, o, e: m.StepLR(o, step_size=3, gamma=0.5, last_epoch=e),
    "MultiStepLR": lambda m, o, e: m.MultiStepLR(o, [2, 6, 8], gamma=0.5, last_epoch=e),
    "ExponentialLR": lambda m, o, e: m.ExponentialLR(o, gamma=0.9, last_epoch=e),
    "LinearLR": lambda m, o, e: m.LinearLR(o, start_factor=0.5, total_iters=6, last_epoch=e),
    "CosineAnnealingLR": lambda m, o, e: m.CosineAnnealingLR(o, 7, 0.001, last_epoch=e),
    "LambdaLR": lambda m, o, e: m.LambdaLR(o, lambda k: 0.9 ** k, last_epoch=e),
}


@pytest.mark.parametrize("name", list(RESUMABLE))
def test_resuming_at_last_epoch_matches_torch(name):
    def make(m, o):
        for g in o.param_groups:
            g["initial_lr"] = g["lr"] * 2
        return RESUMABLE[name](m, o, 4)
    ours, _ = run_both(make, 6)
    assert ours.base_lrs == [0.2, 0.04]


@pytest.mark.parametrize("name", list(RESUMABLE))
def test_step_with_an_epoch_matches_torch(name):
    """step(epoch) jumps there (the closed form where there is one), warning as torch."""
    lz_opt, t_opt = optimizers()
    ours, theirs = RESUMABLE[name](lrs, lz_opt, -1), RESUMABLE[name](TLRS, t_opt, -1)
    for epoch in (3, 7, 2, 12, 5):
        with pytest.warns(UserWarning) as caught:
            ours.step(epoch)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            theirs.step(epoch)
        assert [str(w.message) for w in caught] == [
            f"{name}.step(epoch) is deprecated: call step() once per epoch"]
        assert caught[0].filename != lrs.__file__      # reported at a caller of step()
        assert_same_state(ours, theirs)


@pytest.mark.parametrize("name", list(CASES) + ["ReduceLROnPlateau"])
def test_state_dict_round_trip_resumes_the_same_rates(name):
    make = CASES.get(name, lambda m, o: m.ReduceLROnPlateau(o, patience=1, cooldown=1))
    metrics = None if name != "ReduceLROnPlateau" else [1.0, 0.9] + [0.9] * 20
    kwargs = dict(momentum=0.9) if name.startswith("OneCycle") else {}

    def build():
        opt, _ = optimizers(**kwargs)
        return opt, make(lrs, opt)
    opt, sched = build()
    full = trace(opt, sched, 20, metrics)
    opt, sched = build()
    trace(opt, sched, 7, metrics)
    state = sched.state_dict()
    assert "optimizer" not in state and state["last_epoch"] == 7
    opt2, sched2 = build()
    opt2.load_state_dict(opt.state_dict())
    sched2.load_state_dict(state)
    assert trace(opt2, sched2, 13, None if metrics is None else metrics[7:]) == full[7:]


def test_lambda_state_dict_without_lambdas_still_loads():
    """A state dict without 'lr_lambdas' (nothing to restore in them) loads the rest."""
    opt, _ = optimizers()
    sched = lrs.LambdaLR(opt, lambda e: 0.5 ** e)
    state = {k: v for k, v in sched.state_dict().items() if k != "lr_lambdas"}
    state.update(last_epoch=3, base_lrs=[1.0, 2.0])
    sched.load_state_dict(state)
    sched.step()
    assert sched.get_last_lr() == [0.0625, 0.125]
