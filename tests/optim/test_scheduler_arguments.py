"""Every argument check of the schedulers: a wrong kind is a TypeError, a wrong value a
ValueError, and the message (compared whole) names the scheduler, the argument and what
it got."""
import numpy as np
import pytest

import lezero as lz
from lezero import optim
from lezero.optim import lr_scheduler as lrs
from tests.optim.test_lr_scheduler import optimizers

ONE = lambda e: 1.0
PER_GROUP = "expected 2 values (one per param group), got"


def other_optimizer():
    return optim.SGD([lz.Parameter(np.zeros(1))], lr=0.1)


BAD = [
    # the base class and the optimizer argument
    (lambda o: lrs.StepLR(o, 2, last_epoch=1.0), TypeError,
     "StepLR: last_epoch must be an int, got float 1.0"),
    (lambda o: lrs.ExponentialLR(o, 0.5, last_epoch=3), KeyError,
     "ExponentialLR: param group 0 has no 'initial_lr', needed to resume at last_epoch=3 "
     "(load the optimizer state first, or pass last_epoch=-1)"),
    (lambda o: lrs.StepLR("sgd", 2), TypeError,
     "StepLR: expected a lezero.optim.Optimizer, got str"),
    (lambda o: lrs.LambdaLR("sgd", ONE), TypeError,
     "LambdaLR: expected a lezero.optim.Optimizer, got str"),
    (lambda o: lrs.SequentialLR("sgd", [lrs.StepLR(o, 2)], []), TypeError,
     "SequentialLR: expected a lezero.optim.Optimizer, got str"),
    (lambda o: lrs.OneCycleLR(None, 0.1, 5), TypeError,
     "OneCycleLR: expected a lezero.optim.Optimizer, got NoneType"),
    (lambda o: lrs.ReduceLROnPlateau([o]), TypeError,
     "ReduceLROnPlateau: expected a lezero.optim.Optimizer, got list"),
    # StepLR, MultiStepLR, ExponentialLR, LinearLR, CosineAnnealingLR, LambdaLR
    (lambda o: lrs.StepLR(o, 0), ValueError, "StepLR: step_size must be a positive int, got 0"),
    (lambda o: lrs.StepLR(o, 2, gamma="0.5"), TypeError,
     "StepLR: gamma must be a number, got str '0.5'"),
    (lambda o: lrs.MultiStepLR(o, [2, 4.5]), TypeError,
     "MultiStepLR: milestones[1] must be an int, got float 4.5"),
    (lambda o: lrs.MultiStepLR(o, [2], gamma=None), TypeError,
     "MultiStepLR: gamma must be a number, got NoneType None"),
    (lambda o: lrs.ExponentialLR(o, "0.9"), TypeError,
     "ExponentialLR: gamma must be a number, got str '0.9'"),
    (lambda o: lrs.LinearLR(o, start_factor=0), ValueError,
     "LinearLR: start_factor must be in (0, 1], got 0.0"),
    (lambda o: lrs.LinearLR(o, start_factor=1.5), ValueError,
     "LinearLR: start_factor must be in (0, 1], got 1.5"),
    (lambda o: lrs.LinearLR(o, end_factor=-0.1), ValueError,
     "LinearLR: end_factor must be in [0, 1], got -0.1"),
    (lambda o: lrs.LinearLR(o, end_factor=1.5), ValueError,
     "LinearLR: end_factor must be in [0, 1], got 1.5"),
    (lambda o: lrs.LinearLR(o, end_factor="1"), TypeError,
     "LinearLR: end_factor must be a number, got str '1'"),
    (lambda o: lrs.LinearLR(o, total_iters=2.0), TypeError,
     "LinearLR: total_iters must be an int, got float 2.0"),
    (lambda o: lrs.LinearLR(o, total_iters=-1), ValueError,
     "LinearLR: total_iters must be >= 0, got -1"),
    (lambda o: lrs.CosineAnnealingLR(o, 0), ValueError,
     "CosineAnnealingLR: T_max must be positive, got 0"),
    (lambda o: lrs.CosineAnnealingLR(o, "5"), TypeError,
     "CosineAnnealingLR: T_max must be a number, got str '5'"),
    (lambda o: lrs.CosineAnnealingLR(o, 5, eta_min="0"), TypeError,
     "CosineAnnealingLR: eta_min must be a number, got str '0'"),
    (lambda o: lrs.LambdaLR(o, 3), TypeError, "LambdaLR: lr_lambda must be callable, got int"),
    (lambda o: lrs.LambdaLR(o, [ONE]), ValueError, f"LambdaLR lr_lambda: {PER_GROUP} 1"),
    # SequentialLR
    (lambda o: lrs.SequentialLR(o, [], []), ValueError,
     "SequentialLR: expects at least one scheduler, got none"),
    (lambda o: lrs.SequentialLR(o, [object()], []), TypeError,
     "SequentialLR: schedulers[0] must be an LRScheduler, got object"),
    (lambda o: lrs.SequentialLR(o, [lrs.ReduceLROnPlateau(o)], []), ValueError,
     "SequentialLR: schedulers[0] is a ReduceLROnPlateau, which needs a metric in step() "
     "and cannot be sequenced"),
    (lambda o: lrs.SequentialLR(o, [lrs.StepLR(o, 2), lrs.StepLR(other_optimizer(), 2)], [3]),
     ValueError, "SequentialLR: schedulers[1] (StepLR) drives a different optimizer"),
    (lambda o: lrs.SequentialLR(o, [lrs.StepLR(o, 2), lrs.StepLR(o, 3)], []), ValueError,
     "SequentialLR: 2 schedulers need 1 milestones, got 0"),
    (lambda o: lrs.SequentialLR(o, [lrs.StepLR(o, 2), lrs.StepLR(o, 3)], [2.5]), TypeError,
     "SequentialLR: milestones[0] must be an int, got float 2.5"),
    (lambda o: lrs.SequentialLR(o, [lrs.StepLR(o, 2)] * 3, [5, 2]), ValueError,
     "SequentialLR: milestones must be in increasing order, got [5, 2]"),
    # OneCycleLR
    (lambda o: lrs.OneCycleLR(o, 0.1), ValueError,
     "OneCycleLR: give total_steps, or epochs and steps_per_epoch"),
    (lambda o: lrs.OneCycleLR(o, 0.1, epochs=3), ValueError,
     "OneCycleLR: give total_steps, or epochs and steps_per_epoch"),
    (lambda o: lrs.OneCycleLR(o, 0.1, steps_per_epoch=3), ValueError,
     "OneCycleLR: give total_steps, or epochs and steps_per_epoch"),
    (lambda o: lrs.OneCycleLR(o, 0.1, 0), ValueError,
     "OneCycleLR: total_steps must be a positive int, got 0"),
    (lambda o: lrs.OneCycleLR(o, 0.1, 2.0), TypeError,
     "OneCycleLR: total_steps must be an int, got float 2.0"),
    (lambda o: lrs.OneCycleLR(o, 0.1, epochs=0, steps_per_epoch=3), ValueError,
     "OneCycleLR: epochs must be a positive int, got 0"),
    (lambda o: lrs.OneCycleLR(o, 0.1, epochs=2, steps_per_epoch=0), ValueError,
     "OneCycleLR: steps_per_epoch must be a positive int, got 0"),
    (lambda o: lrs.OneCycleLR(o, 0.1, 5, pct_start="0.3"), TypeError,
     "OneCycleLR: pct_start must be a number, got str '0.3'"),
    (lambda o: lrs.OneCycleLR(o, 0.1, 5, div_factor="25"), TypeError,
     "OneCycleLR: div_factor must be a number, got str '25'"),
    (lambda o: lrs.OneCycleLR(o, 0.1, 5, final_div_factor=None), TypeError,
     "OneCycleLR: final_div_factor must be a number, got NoneType None"),
    (lambda o: lrs.OneCycleLR(o, 0.1, 5, last_epoch=0.5), TypeError,
     "OneCycleLR: last_epoch must be an int, got float 0.5"),
    (lambda o: lrs.OneCycleLR(o, 0.1, 5, pct_start=1), ValueError,
     "OneCycleLR: pct_start must be a float in [0, 1], got 1"),
    (lambda o: lrs.OneCycleLR(o, 0.1, 5, pct_start=1.5), ValueError,
     "OneCycleLR: pct_start must be a float in [0, 1], got 1.5"),
    (lambda o: lrs.OneCycleLR(o, 0.1, 5, pct_start=-0.1), ValueError,
     "OneCycleLR: pct_start must be a float in [0, 1], got -0.1"),
    (lambda o: lrs.OneCycleLR(o, 0.1, 5, anneal_strategy="step"), ValueError,
     "OneCycleLR: anneal_strategy must be one of 'cos', 'linear', got 'step'"),
    (lambda o: lrs.OneCycleLR(o, 0.1, 5, three_phase=1), TypeError,
     "OneCycleLR: three_phase must be a bool, got 1"),
    (lambda o: lrs.OneCycleLR(o, 0.1, 5, cycle_momentum="yes"), TypeError,
     "OneCycleLR: cycle_momentum must be a bool, got str 'yes'"),
    (lambda o: lrs.OneCycleLR(o, "0.1", 5), TypeError,
     "OneCycleLR: max_lr must be a number, got str '0.1'"),
    (lambda o: lrs.OneCycleLR(o, [0.1], 5), ValueError, f"OneCycleLR max_lr: {PER_GROUP} 1"),
    (lambda o: lrs.OneCycleLR(o, 0.1, 5, max_momentum="0.9"), TypeError,
     "OneCycleLR: max_momentum must be a number, got str '0.9'"),
    (lambda o: lrs.OneCycleLR(o, 0.1, 5, max_momentum=[0.9] * 3), ValueError,
     f"OneCycleLR max_momentum: {PER_GROUP} 3"),
    (lambda o: lrs.OneCycleLR(o, 0.1, 5, base_momentum=[0.8, None]), TypeError,
     "OneCycleLR: base_momentum must be a number, got NoneType None"),
    (lambda o: lrs.OneCycleLR(o, 0.1, 5, base_momentum=[0.8]), ValueError,
     f"OneCycleLR base_momentum: {PER_GROUP} 1"),
    (lambda o: lrs.OneCycleLR(optim.Adagrad([lz.Parameter(np.zeros(1))]), 0.1, 5), ValueError,
     "OneCycleLR: cycle_momentum=True needs an optimizer with momentum or betas, Adagrad "
     "has neither"),
    # ReduceLROnPlateau
    (lambda o: lrs.ReduceLROnPlateau(o, factor=1.0), ValueError,
     "ReduceLROnPlateau: factor must be < 1.0, got 1.0"),
    (lambda o: lrs.ReduceLROnPlateau(o, factor="0.1"), TypeError,
     "ReduceLROnPlateau: factor must be a number, got str '0.1'"),
    (lambda o: lrs.ReduceLROnPlateau(o, mode="up"), ValueError,
     "ReduceLROnPlateau: mode must be one of 'min', 'max', got 'up'"),
    (lambda o: lrs.ReduceLROnPlateau(o, mode=0), TypeError,
     "ReduceLROnPlateau: mode must be one of 'min', 'max', got 0"),
    (lambda o: lrs.ReduceLROnPlateau(o, threshold_mode="relative"), ValueError,
     "ReduceLROnPlateau: threshold_mode must be one of 'rel', 'abs', got 'relative'"),
    (lambda o: lrs.ReduceLROnPlateau(o, patience=-1), ValueError,
     "ReduceLROnPlateau: patience must be >= 0, got -1"),
    (lambda o: lrs.ReduceLROnPlateau(o, patience=2.0), TypeError,
     "ReduceLROnPlateau: patience must be an int, got float 2.0"),
    (lambda o: lrs.ReduceLROnPlateau(o, cooldown=-1), ValueError,
     "ReduceLROnPlateau: cooldown must be >= 0, got -1"),
    (lambda o: lrs.ReduceLROnPlateau(o, threshold=-0.1), ValueError,
     "ReduceLROnPlateau: threshold must be in [0, inf), got -0.1"),
    (lambda o: lrs.ReduceLROnPlateau(o, eps=-1e-8), ValueError,
     "ReduceLROnPlateau: eps must be in [0, inf), got -1e-08"),
    (lambda o: lrs.ReduceLROnPlateau(o, min_lr="0"), TypeError,
     "ReduceLROnPlateau: min_lr must be a number, got str '0'"),
    (lambda o: lrs.ReduceLROnPlateau(o, min_lr=[0.0]), ValueError,
     f"ReduceLROnPlateau min_lr: {PER_GROUP} 1"),
]


@pytest.mark.parametrize("make,error,message", BAD, ids=[m for _, _, m in BAD])
def test_a_bad_argument_raises_naming_it(make, error, message):
    opt, _ = optimizers(momentum=0.9)
    lrs_before = [g["lr"] for g in opt.param_groups]
    with pytest.raises(error) as info:
        make(opt)
    assert type(info.value) is error and info.value.args == (message,)
    if "initial_lr" not in message:
        assert [g["lr"] for g in opt.param_groups] == lrs_before
