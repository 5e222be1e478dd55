"""Hostile and broken optimizer / scheduler state dicts (issue 32): a resumed checkpoint is
data from a file, and ``load_state_dict`` must refuse anything an update rule could not
use safely, before it changes anything.

The defect: Adam's kernel walked a (300, 300) parameter over a (1, 300) ``exp_avg`` loaded
from a state dict (SIGSEGV, ``malloc(): invalid size``, or non-finite weights).  Every
optimizer's state is now checked by kind and shape, and every scheduler's by kind.
"""
import copy

import numpy as np
import pytest

import lezero as lz
from lezero import optim
from lezero.optim import lr_scheduler as lrs

SHAPE = (3, 4)

# (class, options, the per-parameter buffers its rule reads)
OPTIMIZERS = [
    (optim.SGD, dict(momentum=0.9), ["momentum_buffer"]),
    (optim.Adam, dict(amsgrad=True), ["exp_avg", "exp_avg_sq", "max_exp_avg_sq"]),
    (optim.AdamW, {}, ["exp_avg", "exp_avg_sq"]),
    (optim.Adamax, {}, ["exp_avg", "exp_inf"]),
    (optim.NAdam, {}, ["exp_avg", "exp_avg_sq"]),
    (optim.RMSprop, dict(momentum=0.9, centered=True),
     ["square_avg", "momentum_buffer", "grad_avg"]),
    (optim.Adagrad, {}, ["sum"]),
    (optim.Adadelta, {}, ["square_avg", "acc_delta"]),
    (optim.Lion, {}, ["exp_avg"]),
]
BUFFERS = [(cls, kw, key) for cls, kw, keys in OPTIMIZERS for key in keys]


def stepped(cls, kwargs, dtype=np.float32):
    """An optimizer over two named parameters after one step, and its state dict."""
    params = [("b", lz.Parameter(np.ones(2, dtype))),
              ("w", lz.Parameter(np.linspace(-1, 1, 12).astype(dtype).reshape(SHAPE)))]
    opt = cls(params, **kwargs)
    for _, p in params:
        p.grad = lz.Variable(np.full(p.shape, 0.5, dtype), requires_grad=False)
    opt.step()
    return opt, copy.deepcopy(opt.state_dict())


def refused(opt, sd, exc, match):
    """``load_state_dict(sd)`` raises ``exc`` matching ``match`` and changes nothing."""
    state, groups = opt.state, opt.param_groups
    before = copy.deepcopy(opt.state_dict())
    with pytest.raises(exc, match=match):
        opt.load_state_dict(sd)
    assert opt.state is state and opt.param_groups is groups
    after = opt.state_dict()
    for k, entry in before["state"].items():
        for key, v in entry.items():
            np.testing.assert_array_equal(after["state"][k][key], v)


@pytest.mark.parametrize("cls,kwargs,key", BUFFERS,
                         ids=[f"{c.__name__}-{k}" for c, _, k in BUFFERS])
def test_a_buffer_of_another_shape_is_refused_naming_everything(cls, kwargs, key):
    opt, sd = stepped(cls, kwargs)
    sd["state"][1][key] = np.zeros((1, 3), np.float32)
    name = cls.__name__
    refused(opt, sd, ValueError,
            rf"^{name}\.load_state_dict: param group 0, parameter 1 \('w'\) \(index 1\): "
            rf"state '{key}' has shape \(1, 3\), expected \(3, 4\) \(the parameter's shape\)$")


def test_the_issue_case_adam_over_a_1x300_buffer_is_refused():
    p = lz.Parameter(np.ones((300, 300), np.float32))
    opt = optim.Adam([p])
    hostile = {"state": {0: {"step": 1, "exp_avg": np.zeros((1, 300), np.float32),
                             "exp_avg_sq": np.zeros((1, 300), np.float32)}},
               "param_groups": [{"params": [0]}]}
    with pytest.raises(ValueError, match=r"'exp_avg' has shape \(1, 300\), expected "
                                         r"\(300, 300\)"):
        opt.load_state_dict(hostile)
    p.grad = lz.Variable(np.ones((300, 300), np.float32))
    opt.step()                             # a fresh first step, on the untouched state
    np.testing.assert_allclose(p.data, 1 - 1e-3, rtol=1e-6)


@pytest.mark.parametrize("cls,kwargs,key", BUFFERS[:4] + BUFFERS[-2:],
                         ids=[f"{c.__name__}-{k}" for c, _, k in BUFFERS[:4] + BUFFERS[-2:]])
@pytest.mark.parametrize("bad,what", [
    (np.array(["a"] * 12, dtype=object).reshape(SHAPE), "dtype object"),
    (np.zeros(SHAPE, np.complex64), "dtype complex64"),
    (np.zeros(SHAPE, bool), "dtype bool"),
    ([[0.0] * 4] * 3, "got list"),
    ("zeros", "got str"),
])
def test_a_buffer_of_another_kind_is_a_type_error(cls, kwargs, key, bad, what):
    opt, sd = stepped(cls, kwargs)
    sd["state"][0 if key != "momentum_buffer" or cls is optim.SGD else 1][key] = bad
    with pytest.raises(TypeError, match=rf"^{cls.__name__}\.load_state_dict: .*state "
                                        rf"'{key}' must .*{what}"):
        opt.load_state_dict(sd)


def test_integer_buffers_of_the_right_shape_take_the_parameters_dtype():
    opt, sd = stepped(optim.Adam, {})
    sd["state"][1]["exp_avg"] = np.ones(SHAPE, np.int64)
    opt.load_state_dict(sd)
    loaded = opt.state[opt.param_groups[0]["params"][1]]["exp_avg"]
    assert loaded.dtype == np.float32 and loaded.flags.c_contiguous
    np.testing.assert_array_equal(loaded, 1.0)


@pytest.mark.parametrize("step,exc,match", [
    (-1, ValueError, "got -1"),
    (2.5, ValueError, "got 2.5"),
    (float("nan"), ValueError, "got nan"),
    (float("inf"), ValueError, "got inf"),
    (np.arange(5.0), TypeError, r"got an array of shape \(5,\)"),
    (True, TypeError, "got bool True"),
    ("3", TypeError, "got str '3'"),
    (None, TypeError, "got NoneType None"),
])
def test_step_must_be_a_count(step, exc, match):
    opt, sd = stepped(optim.Adam, {})
    sd["state"][0]["step"] = step
    refused(opt, sd, exc, r"^Adam\.load_state_dict: param group 0, parameter 0 \('b'\) "
                          r"\(index 0\): state 'step' must be a non-negative integer, " + match)


def test_counts_from_pytorch_arrays_are_plain_ints():
    opt, sd = stepped(optim.Adagrad, {})
    sd["state"][0]["step"] = np.array(7.0, np.float32)
    opt.load_state_dict(sd)
    state = opt.state[opt.param_groups[0]["params"][0]]
    assert type(state["step"]) is int and state["step"] == 7


@pytest.mark.parametrize("value", [1.5, -0.1, float("nan")])
def test_nadam_mu_product_must_be_a_fraction(value):
    opt, sd = stepped(optim.NAdam, {})
    sd["state"][1]["mu_product"] = value
    refused(opt, sd, ValueError, r"state 'mu_product' must be a number in \[0, 1\]")


@pytest.mark.parametrize("cls,kwargs,key", [
    (optim.Adam, {}, "exp_avg_sq"), (optim.Adam, {}, "step"), (optim.Adamax, {}, "exp_inf"),
    (optim.NAdam, {}, "mu_product"), (optim.RMSprop, {}, "square_avg"),
    (optim.Adagrad, {}, "sum"), (optim.Adadelta, {}, "acc_delta"),
])
def test_a_partial_state_is_refused(cls, kwargs, key):
    """A state missing what the rule reads used to fail at the next step (KeyError)."""
    opt, sd = stepped(cls, kwargs)
    del sd["state"][1][key]
    refused(opt, sd, ValueError, rf"^{cls.__name__}\.load_state_dict: param group 0, "
                                 rf"parameter 1 \('w'\) \(index 1\): state '{key}' is missing")


def test_an_empty_state_is_a_fresh_start_and_none_buffers_load():
    opt, sd = stepped(optim.SGD, dict(momentum=0.9))
    sd["state"][0] = {}
    sd["state"][1]["momentum_buffer"] = None            # PyTorch writes None at times
    opt.load_state_dict(sd)
    assert opt.state[opt.param_groups[0]["params"][1]]["momentum_buffer"] is None


def nested(depth):
    value = [0.9, 0.99]
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("mutate,exc,match", [
    (lambda sd: sd["state"].update({-1: {}}), ValueError,
     "a state key must be a parameter index .*got -1"),
    (lambda sd: sd["state"].update({"x": {}}), ValueError,
     "a state key must be a parameter index .*got str 'x'"),
    (lambda sd: sd.update(state={1.5: {}}), ValueError,
     "a state key must be a parameter index .*got float 1.5"),
    (lambda sd: sd.update(state={True: {}}), ValueError,
     "a state key must be a parameter index .*got bool True"),
    (lambda sd: sd["state"].update({5: {}}), ValueError,
     "state for parameter 5 has no matching parameter"),
    (lambda sd: sd["state"].update({0: [1, 2]}), TypeError,
     r"param group 0, parameter 0 \('b'\) \(index 0\): its state must be a dict, got list"),
    (lambda sd: sd.update(state=[]), TypeError, "'state' must be a dict, got list"),
    (lambda sd: sd.update(param_groups={}), TypeError, "'param_groups' must be a list"),
    (lambda sd: sd["param_groups"][0].update(params=[0, 0]), ValueError,
     "parameter index 0 appears twice"),
    (lambda sd: sd["param_groups"][0].update(params=[0, "1x"]), ValueError,
     r"param group 0 'params'\[1\] must be a parameter index"),
    (lambda sd: sd["param_groups"][0].update(params=3), ValueError,
     "param group 0 must be a dict with a 'params' list"),
    (lambda sd: sd["param_groups"].__setitem__(0, "group"), ValueError,
     "param group 0 must be a dict with a 'params' list, got str"),
    (lambda sd: sd["param_groups"].append({"params": []}), ValueError,
     "the state dict has 2 parameter groups, this optimizer has 1"),
    (lambda sd: sd["param_groups"][0].update(params=[0]), ValueError,
     "param group 0 holds 1 parameters in the state dict but 2"),
    (lambda sd: sd["param_groups"][0].update(param_names=["b"]), ValueError,
     "param group 0: param_names must be a list of 2 strings, got list"),
    (lambda sd: sd["param_groups"][0].update(param_names=["b", 3]), ValueError,
     "param group 0: param_names must be a list of 2 strings"),
    (lambda sd: sd["param_groups"][0].update(betas=nested(100000)), ValueError,
     "param group 0: option 'betas' is nested more than 8 lists deep"),
])
def test_indices_and_groups_must_match(mutate, exc, match):
    opt, sd = stepped(optim.Adam, {})
    mutate(sd)
    refused(opt, sd, exc, r"^Adam\.load_state_dict: " + match)


def test_json_style_string_indices_still_load():
    opt, sd = stepped(optim.Adam, {})
    sd = {"state": {str(k): v for k, v in sd["state"].items()},
          "param_groups": [dict(sd["param_groups"][0], params=["0", "1"])]}
    opt.load_state_dict(sd)
    assert opt.state[opt.param_groups[0]["params"][0]]["step"] == 1


@pytest.mark.parametrize("cls,option,value,exc,match", [
    (optim.Adam, "lr", "fast", TypeError, "lr must be a number, got str 'fast'"),
    (optim.Adam, "lr", -1.0, ValueError, r"invalid lr=-1.0"),
    (optim.Adam, "betas", (0.9,), ValueError, "betas must be a pair"),
    (optim.Adam, "betas", (1.5, 0.9), ValueError, r"invalid betas\[0\]=1.5"),
    (optim.Adam, "betas", 0.9, TypeError, "betas must be a pair of numbers"),
    (optim.Adam, "amsgrad", "yes", TypeError, "amsgrad must be a bool"),
    (optim.Adam, "eps", None, TypeError, "eps must be a number"),
    (optim.SGD, "momentum", [0.9], TypeError, "momentum must be a number"),
    (optim.RMSprop, "alpha", -0.5, ValueError, "invalid alpha=-0.5"),
    (optim.Adadelta, "rho", 2.0, ValueError, "invalid rho=2.0"),
    (optim.NAdam, "momentum_decay", -1.0, ValueError, "invalid momentum_decay"),
    (optim.LBFGS, "history_size", 0, ValueError, "history_size must be a positive int"),
    (optim.LBFGS, "max_iter", 2.5, TypeError, "max_iter must be an int"),
    (optim.LBFGS, "max_eval", None, TypeError, "max_eval must be an int"),
    (optim.LBFGS, "line_search_fn", "armijo", ValueError, "line_search_fn must be one of"),
])
def test_loaded_options_pass_the_constructors_checks(cls, option, value, exc, match):
    p = lz.Parameter(np.ones(2))
    opt = cls([p])
    sd = copy.deepcopy(opt.state_dict())
    sd["param_groups"][0][option] = value
    refused(opt, sd, exc, rf"^{cls.__name__}\.load_state_dict: param group 0: .*{match}")


# ----- LBFGS: one history over all parameters -------------------------------------------
def lbfgs_after_two_steps():
    a, b = lz.Parameter(np.array([1.5, -0.5])), lz.Parameter(np.array([[2.0]]))
    opt = optim.LBFGS([a, b], max_iter=3, history_size=2)

    def closure():
        opt.zero_grad()
        loss = (a * a).sum() + (b * b * b * b).sum()
        loss.backward()
        return loss
    opt.step(closure)
    opt.step(closure)
    return opt, copy.deepcopy(opt.state_dict())


@pytest.mark.parametrize("key,value,exc,match", [
    ("d", np.zeros(2), ValueError,
     r"state 'd' has shape \(2,\), expected \(3,\) \(all parameters' total size\)"),
    ("prev_flat_grad", np.zeros((3, 1)), ValueError,
     r"state 'prev_flat_grad' has shape \(3, 1\), expected \(3,\)"),
    ("old_dirs", np.zeros(3), TypeError, "state 'old_dirs' must be a list"),
    ("old_stps", [np.zeros(4)], ValueError, r"state 'old_stps\[0\]' has shape \(4,\)"),
    ("ro", ["x"], TypeError, r"state 'ro\[0\]' must be a real number"),
    ("n_iter", -2, ValueError, "state 'n_iter' must be a non-negative integer"),
    ("H_diag", "big", TypeError, "state 'H_diag' must be a real number"),
])
def test_lbfgs_history_entries_are_checked(key, value, exc, match):
    opt, sd = lbfgs_after_two_steps()
    sd["state"][0][key] = value
    refused(opt, sd, exc, r"^LBFGS\.load_state_dict: param group 0, parameter 0 "
                          r"\(index 0\): " + match)


def test_lbfgs_history_lists_must_agree_and_fit_history_size():
    opt, sd = lbfgs_after_two_steps()
    entry = sd["state"][0]
    assert len(entry["old_dirs"]) >= 1
    entry["ro"] = entry["ro"] + [1.0]
    refused(opt, sd, ValueError, r"^LBFGS\.load_state_dict: the state of parameter 0: "
                                 r"'old_dirs', 'old_stps' and 'ro' must have one length")
    opt, sd = lbfgs_after_two_steps()
    entry = sd["state"][0]
    for key in ("old_dirs", "old_stps", "ro"):
        entry[key] = entry[key][:1] * 3
    refused(opt, sd, ValueError, "of at most history_size=2, got lengths")
    opt, sd = lbfgs_after_two_steps()
    del sd["state"][0]["prev_flat_grad"]
    refused(opt, sd, ValueError, "has n_iter=.* but no 'prev_flat_grad'")


def test_lbfgs_resume_still_works():
    opt, sd = lbfgs_after_two_steps()
    opt.load_state_dict(sd)
    assert opt.state[opt.param_groups[0]["params"][0]]["n_iter"] == sd["state"][0]["n_iter"]


# ----- schedulers ---------------------------------------------------------------------------
def two_groups():
    return optim.SGD([{"params": [lz.Parameter(np.ones(2))]},
                      {"params": [lz.Parameter(np.ones(1))], "lr": 0.2}], lr=0.1, momentum=0.9)


def scheduler(make):
    opt = two_groups()
    sched = make(opt)
    for _ in range(3):
        sched.step()
    return sched, copy.deepcopy(sched.state_dict())


def sched_refused(sched, sd, exc, match):
    before = sched.state_dict()
    with pytest.raises(exc, match=match):
        sched.load_state_dict(sd)
    assert sched.state_dict() == before


@pytest.mark.parametrize("key,value,exc,match", [
    ("optimizer", "evil", ValueError, "unknown entry 'optimizer'"),
    ("get_lr", None, ValueError, "unknown entry 'get_lr'"),
    ("last_epoch", "3", TypeError, "last_epoch must be an int, got str '3'"),
    ("last_epoch", 2.5, ValueError, "last_epoch must be an int, got 2.5"),
    ("step_size", None, TypeError, "step_size must be an int"),
    ("gamma", [0.5], TypeError, "gamma must be a real number"),
    ("base_lrs", [0.1], ValueError, r"base_lrs must hold one value per param group \(2\)"),
    ("base_lrs", [0.1, "x"], TypeError, r"base_lrs\[1\] must be a real number"),
    ("_last_lr", 0.1, ValueError, "_last_lr must hold one value per param group"),
    ("_is_initial", 1, TypeError, "_is_initial must be a bool"),
    ("step_size", 0, ValueError, "step_size must be >= 1, got 0"),
])
def test_step_lr_state_is_checked(key, value, exc, match):
    sched, sd = scheduler(lambda o: lrs.StepLR(o, step_size=2))
    sd[key] = value
    sched_refused(sched, sd, exc, r"^StepLR\.load_state_dict: " + match)


@pytest.mark.parametrize("make,key,value,match", [
    (lambda o: lrs.CosineAnnealingLR(o, T_max=10), "T_max", 0, "T_max must be > 0, got 0"),
    (lambda o: lrs.LinearLR(o), "start_factor", 0.0, "start_factor must be > 0"),
    (lambda o: lrs.LinearLR(o), "total_iters", -1, "total_iters must be >= 0"),
])
def test_scheduler_values_a_schedule_divides_by_are_checked(make, key, value, match):
    sched, sd = scheduler(make)
    sd[key] = value
    sched_refused(sched, sd, ValueError, rf"^{type(sched).__name__}\.load_state_dict: {match}")


def test_scheduler_state_must_be_a_dict():
    sched, _ = scheduler(lambda o: lrs.StepLR(o, step_size=2))
    with pytest.raises(TypeError, match=r"^StepLR\.load_state_dict: expected a dict, got list"):
        sched.load_state_dict([("last_epoch", 1)])


@pytest.mark.parametrize("key,value,match", [
    ("mode", "sideways", r"mode must be one of \('min', 'max'\)"),
    ("threshold_mode", "log", "threshold_mode must be one of"),
    ("min_lrs", [0.0], "min_lrs must hold one value per param group"),
    ("patience", 1.5, "patience must be an int"),
])
def test_plateau_state_is_checked(key, value, match):
    sched = lrs.ReduceLROnPlateau(two_groups())
    sd = copy.deepcopy(sched.state_dict())
    sd[key] = value
    sched_refused(sched, sd, ValueError, r"^ReduceLROnPlateau\.load_state_dict: " + match)


@pytest.mark.parametrize("mutate,match", [
    (lambda sd: sd["_phases"].pop(), "_phases must have 2 entries, got 1"),
    (lambda sd: sd["_phases"][0].update(start_lr="__class__"),
     r"_phases\[0\]\['start_lr'\] must be one of"),
    (lambda sd: sd["_phases"][1].update(extra=1), r"_phases\[1\] must be a dict with keys"),
    (lambda sd: sd["_phases"][0].update(end_step="2"),
     r"_phases\[0\]\['end_step'\] must be a real"),
    (lambda sd: sd.update(anneal_strategy="cubic"), "anneal_strategy must be one of"),
    (lambda sd: sd["_phases"][1].update(end_step=sd["_phases"][0]["end_step"]),
     r"_phases\[1\] ends where it starts"),
    (lambda sd: sd.update(total_steps=0), "total_steps must be >= 1, got 0"),
])
def test_one_cycle_phases_are_checked(mutate, match):
    sched, sd = scheduler(lambda o: lrs.OneCycleLR(o, max_lr=1.0, total_steps=10))
    mutate(sd)
    with pytest.raises((TypeError, ValueError), match=r"^OneCycleLR\.load_state_dict: " + match):
        sched.load_state_dict(sd)


def test_lambda_state_may_set_only_plain_attributes():
    class Scale:
        def __init__(self):
            self.factor = 1.0

        def __call__(self, epoch):
            return self.factor
    fn = Scale()
    sched, sd = scheduler(lambda o: lrs.LambdaLR(o, [fn, lambda e: 1.0]))
    sd["lr_lambdas"] = [{"__class__": dict}, None]
    with pytest.raises(ValueError, match=r"^LambdaLR\.load_state_dict: lr_lambdas must be"):
        sched.load_state_dict(sd)
    assert type(fn) is Scale
    sd["lr_lambdas"] = [{"factor": 3.0}, None]
    sched.load_state_dict(sd)
    assert fn.factor == 3.0


def test_sequential_checks_every_inner_state_before_setting_any():
    sched, sd = scheduler(lambda o: lrs.SequentialLR(
        o, [lrs.LinearLR(o, total_iters=2), lrs.ExponentialLR(o, gamma=0.9)], milestones=[2]))
    sd["last_epoch"] = 99
    sd["_schedulers"][1]["gamma"] = "hot"
    before = [s.state_dict() for s in sched._schedulers]
    with pytest.raises(TypeError, match=r"^ExponentialLR\.load_state_dict: gamma must be"):
        sched.load_state_dict(sd)
    assert sched.last_epoch == 3 and [s.state_dict() for s in sched._schedulers] == before
    sd["_schedulers"] = sd["_schedulers"][:1]
    with pytest.raises(ValueError, match="_schedulers must hold 2 state dicts"):
        sched.load_state_dict(sd)


def test_a_good_scheduler_state_still_round_trips():
    sched, sd = scheduler(lambda o: lrs.OneCycleLR(o, max_lr=1.0, total_steps=10))
    sched.step()
    sched.load_state_dict(sd)
    assert sched.last_epoch == 3
