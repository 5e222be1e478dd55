"""Adagrad, RMSprop, Adadelta and Lion beyond their update rules (those are compared with
torch in test_update_rules_vs_torch.py and test_optimizers.py): the hyperparameter checks
name the option, its value and its param group; Adagrad's state exists from construction,
as torch's, and restarts from ``initial_accumulator_value`` when a state dict dropped it;
Lion maximizing is Lion on the negated gradient."""
import numpy as np
import pytest
import torch

import lezero as lz
from lezero import optim
from tests.optim.test_update_rules_vs_torch import data, lezero_path, torch_float64  # noqa: F401

BAD_OPTIONS = [
    ("Adagrad", dict(lr=-1), "invalid lr=-1 in param group 1 (must be >= 0)"),
    ("Adagrad", dict(eps=-1e-3), "invalid eps=-0.001 in param group 1 (must be >= 0)"),
    ("Adagrad", dict(weight_decay=-0.5),
     "invalid weight_decay=-0.5 in param group 1 (must be >= 0)"),
    ("Adagrad", dict(lr_decay=-0.1), "invalid lr_decay=-0.1 in param group 1 (must be >= 0)"),
    ("Adagrad", dict(initial_accumulator_value=-1),
     "invalid initial_accumulator_value=-1 in param group 1 (must be >= 0)"),
    ("RMSprop", dict(lr=-1), "invalid lr=-1 in param group 1 (must be >= 0)"),
    ("RMSprop", dict(eps=-1), "invalid eps=-1 in param group 1 (must be >= 0)"),
    ("RMSprop", dict(weight_decay=-1), "invalid weight_decay=-1 in param group 1 (must be >= 0)"),
    ("RMSprop", dict(momentum=-0.9), "invalid momentum=-0.9 in param group 1 (must be >= 0)"),
    ("RMSprop", dict(alpha=-0.5), "invalid alpha=-0.5 in param group 1 (must be >= 0)"),
    ("Adadelta", dict(lr=-1), "invalid lr=-1 in param group 1 (must be >= 0)"),
    ("Adadelta", dict(eps=-1), "invalid eps=-1 in param group 1 (must be >= 0)"),
    ("Adadelta", dict(rho=1.5), "invalid rho=1.5 in param group 1 (must be in [0, 1])"),
    ("Adadelta", dict(rho=-0.1), "invalid rho=-0.1 in param group 1 (must be in [0, 1])"),
    ("Lion", dict(lr=-1), "invalid lr=-1 in param group 1 (must be >= 0)"),
    ("Lion", dict(weight_decay=-0.1),
     "invalid weight_decay=-0.1 in param group 1 (must be >= 0)"),
    ("Lion", dict(betas=(1.0, 0.99)), "invalid betas[0]=1.0 in param group 1 (must be in [0, 1))"),
]


@pytest.mark.parametrize("name,option,message", BAD_OPTIONS,
                         ids=[f"{n}-{next(iter(o))}={next(iter(o.values()))}"
                              for n, o, _ in BAD_OPTIONS])
def test_a_bad_option_names_itself_and_its_group(name, option, message):
    groups = [{"params": [lz.Parameter(np.zeros(2))]},
              dict(params=[lz.Parameter(np.zeros(2))], **option)]
    with pytest.raises(ValueError) as info:
        getattr(optim, name)(groups)
    assert info.value.args == (f"{name}: {message}",)


def test_adagrad_state_exists_from_construction_as_torchs(torch_float64):
    weights, _ = data()
    ours = optim.Adagrad([lz.Parameter(w.copy()) for w in weights], initial_accumulator_value=0.3)
    theirs = torch.optim.Adagrad([torch.nn.Parameter(torch.from_numpy(w.copy())) for w in weights],
                                 initial_accumulator_value=0.3)
    a, b = ours.state_dict()["state"], theirs.state_dict()["state"]
    assert sorted(a) == sorted(b) == [0, 1, 2]
    for i in b:
        assert a[i]["step"] == b[i]["step"].item() == 0
        np.testing.assert_array_equal(a[i]["sum"], b[i]["sum"].numpy())


def test_adagrad_restarts_a_dropped_state_from_the_initial_accumulator():
    """load_state_dict without a parameter's state: the next step is a first step again."""
    weights, grads = data()
    kwargs = dict(lr=0.1, initial_accumulator_value=0.3)
    fresh, path = lezero_path("Adagrad", kwargs, weights, grads[:1])
    params = [lz.Parameter(w.copy()) for w in weights]
    opt = optim.Adagrad(params, **kwargs)
    opt.load_state_dict({"state": {}, "param_groups": opt.state_dict()["param_groups"]})
    assert opt.state == {}
    for p, g in zip(params, grads[0]):
        p.grad = lz.Variable(g.copy(), requires_grad=False)
    opt.step()
    for p, w, g in zip(params, path[0], grads[0]):
        np.testing.assert_array_equal(p.data, w)
        assert opt.state[p]["step"] == 1
        np.testing.assert_allclose(opt.state[p]["sum"], 0.3 + g * g, rtol=1e-15)


@pytest.mark.parametrize("weight_decay", [0.0, 0.2])
def test_lion_maximizing_is_lion_on_the_negated_gradient(weight_decay):
    weights, grads = data()
    kwargs = dict(lr=0.01, betas=(0.8, 0.9), weight_decay=weight_decay)
    _, up = lezero_path("Lion", dict(kwargs, maximize=True), weights, grads)
    _, down = lezero_path("Lion", kwargs, weights, [[-g for g in step] for step in grads])
    assert not np.array_equal(up[-1][0], weights[0])
    for a, b in zip(up, down):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)
