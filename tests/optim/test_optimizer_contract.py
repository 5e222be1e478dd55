"""The ``Optimizer`` base class, piece by piece: zero_grad, parameter groups, option
checks and their messages, ``__repr__``, state_dict / load_state_dict, ``_plain``.

The numbers of the update rules are in test_optimizers.py and test_update_rules_vs_torch.py;
this file pins the contract around them (what PyTorch users expect of ``torch.optim``).
"""
import re

import numpy as np
import pytest
import torch

import lezero as lz
from lezero import optim
from lezero.optim.optimizer import Optimizer, _plain, required


def param(*values):
    return lz.Parameter(np.array(values, dtype=np.float64))


def grad_of(p, *values):
    p.grad = lz.Variable(np.array(values, dtype=p.data.dtype), requires_grad=False)
    return p.grad


# ----- zero_grad -----------------------------------------------------------------------
def test_zero_grad_set_to_none_clears_every_parameter_of_every_group():
    a, b, c, d = param(1.0), param(2.0), param(3.0), param(4.0)
    opt = optim.SGD([{"params": [a, b]}, {"params": [c, d]}], lr=0.1)
    grad_of(b, 1.0)
    grad_of(c, 1.0)
    grad_of(d, 1.0)
    opt.zero_grad()                        # a has no gradient: skipped, not the end
    assert [p.grad for p in (a, b, c, d)] == [None] * 4


def test_zero_grad_in_place_skips_missing_gradients_and_zeroes_the_rest():
    a, b, c = param(1.0), param(2.0, 3.0), param(4.0)
    opt = optim.SGD([a, b, c], lr=0.1)
    gb, gc = grad_of(b, 5.0, 6.0), grad_of(c, 7.0)
    arrays = gb.data, gc.data
    opt.zero_grad(set_to_none=False)
    assert a.grad is None
    assert b.grad is gb and c.grad is gc and b.grad.data is arrays[0]
    np.testing.assert_array_equal(arrays[0], [0.0, 0.0])
    np.testing.assert_array_equal(arrays[1], [0.0])


def test_zero_grad_in_place_replaces_a_read_only_gradient():
    p = param(1.0, 2.0)
    frozen = np.array([3.0, 4.0])
    frozen.flags.writeable = False
    old = p.grad = lz.Variable(frozen, requires_grad=False)
    optim.SGD([p], lr=0.1).zero_grad(set_to_none=False)
    assert p.grad is not old and p.grad.creator is None
    assert p.grad.requires_grad is False
    np.testing.assert_array_equal(p.grad.data, [0.0, 0.0])
    assert p.grad.data.dtype == np.float64
    np.testing.assert_array_equal(frozen, [3.0, 4.0])


def test_zero_grad_in_place_replaces_a_graph_carrying_gradient():
    """After ``backward(create_graph=True)`` ``p.grad`` is a node of a graph: zeroing its
    array in place would corrupt that graph, so it is replaced by a fresh leaf."""
    p = param(1.0, 2.0)
    (p * p * p).sum().backward(create_graph=True)
    old = p.grad
    assert old.creator is not None
    optim.SGD([p], lr=0.1).zero_grad(set_to_none=False)
    assert p.grad is not old
    assert p.grad.creator is None and p.grad.requires_grad is False
    np.testing.assert_array_equal(p.grad.data, [0.0, 0.0])
    np.testing.assert_array_equal(old.data, [3.0, 12.0])      # 3 p^2, left as it was


def test_step_without_closure_returns_none():
    p = param(1.0)
    grad_of(p, 1.0)
    assert optim.SGD([p], lr=0.1).step() is None
    assert p.data[0] == pytest.approx(0.9)


def test_step_rejects_a_gradient_of_another_shape():
    p = param(1.0, 2.0)
    opt = optim.Adam([p])
    p.grad = lz.Variable(np.ones(3), requires_grad=False)
    with pytest.raises(ValueError, match=r"^Adam\.step: a parameter of shape \(2,\) has a "
                                         r"gradient of shape \(3,\)$"):
        opt.step()


# ----- construction and parameter groups ------------------------------------------------
def test_constructor_errors_name_the_optimizer():
    p = param(1.0)
    with pytest.raises(TypeError, match=r"^SGD: params must be an iterable of Parameters "
                                        r"or of param-group dicts, got a single Parameter$"):
        optim.SGD(p)
    with pytest.raises(ValueError, match=r"^Adam: got an empty parameter list \(a model of "
                                         r"lazy layers"):
        optim.Adam([])
    message = ("SGD: params must be an ordered collection (a list), not a set: a set's order "
               "changes between runs and state_dict numbers parameters by position")
    with pytest.raises(TypeError, match=f"^{re.escape(message)}$"):
        optim.SGD({p})


def test_add_param_group_accepts_a_single_parameter_and_refuses_a_set():
    a, b, c = param(1.0), param(2.0), param(3.0)
    opt = optim.SGD([a], lr=0.1)
    opt.add_param_group({"params": b, "lr": 0.5})
    assert opt.param_groups[1]["params"] == [b]
    assert opt.param_groups[1]["lr"] == 0.5 and opt.param_groups[1]["momentum"] == 0
    with pytest.raises(TypeError, match=r"^SGD: params must be an ordered collection"):
        opt.add_param_group({"params": {c}})
    assert len(opt.param_groups) == 2


def test_add_param_group_errors():
    a, b = param(1.0), param(2.0)
    opt = optim.Adam([a])
    with pytest.raises(TypeError, match=r"^Adam\.add_param_group: expected a dict, got list$"):
        opt.add_param_group([b])
    with pytest.raises(ValueError,
                       match=r"^Adam\.add_param_group: the group has no 'params' entry$"):
        opt.add_param_group({"lr": 0.1})
    with pytest.raises(ValueError, match=r"^Adam: params\[0\] is not a leaf \(it was computed "
                                         r"by Mul\); only leaves can be optimized$"):
        opt.add_param_group({"params": [b * 2.0]})
    with pytest.raises(TypeError, match=r"^Adam: params\[1\] must be a Parameter or "
                                        r"Variable, got ndarray$"):
        opt.add_param_group({"params": [b, np.zeros(1)]})
    with pytest.raises(ValueError, match=r"^Adam: a parameter group lists the same "
                                         r"parameter twice$"):
        opt.add_param_group({"params": [b, b]})
    with pytest.raises(ValueError, match=r"^Adam: some parameters appear in more than one "
                                         r"parameter group$"):
        opt.add_param_group({"params": [a]})
    assert len(opt.param_groups) == 1


class Plain(Optimizer):
    """A minimal optimizer whose learning rate has no default (``required``)."""

    def __init__(self, params, lr=required):
        super().__init__(params, dict(lr=lr))

    def _update(self, param, grad, state, hyper):
        param -= hyper["lr"] * grad


def test_a_required_option_must_be_set_by_every_group():
    a, b = param(1.0), param(2.0)
    with pytest.raises(ValueError, match=r"^Plain: parameter group 0 does not set the "
                                         r"required option 'lr'$"):
        Plain([a])
    opt = Plain([{"params": [a], "lr": 0.5}])
    with pytest.raises(ValueError, match=r"^Plain: parameter group 1 does not set the "
                                         r"required option 'lr'$"):
        opt.add_param_group({"params": [b]})
    opt.add_param_group({"params": [b], "lr": 0.25})
    grad_of(a, 2.0)
    grad_of(b, 2.0)
    opt.step()
    assert a.data[0] == 0.0 and b.data[0] == 1.5


@pytest.mark.parametrize("make,kind,message", [
    (lambda p: optim.SGD(p, nesterov="yes"), TypeError,
     "SGD: nesterov must be a bool, got str 'yes'"),
    (lambda p: optim.SGD(p, lr="0.1"), TypeError, "SGD: lr must be a number, got str '0.1'"),
    (lambda p: optim.Adam(p, amsgrad=1), TypeError, "Adam: amsgrad must be a bool, got 1"),
    (lambda p: optim.Adam(p, betas=(0.9, "x")), TypeError,
     "Adam: betas[1] must be a number, got str 'x'"),
    (lambda p: optim.Adam([{"params": p, "betas": 0.9}]), TypeError,
     "Adam: betas must be a pair of numbers, got float 0.9"),
    (lambda p: optim.Adam(p, betas=(0.9, 0.99, 0.999)), ValueError,
     "Adam: betas must be a pair, got (0.9, 0.99, 0.999)"),
    (lambda p: optim.NAdam(p, betas=(-0.1, 0.9)), ValueError,
     "NAdam: invalid betas[0]=-0.1 in param group 0 (must be in [0, 1))"),
    (lambda p: optim.SGD(p, weight_decay=-0.5), ValueError,
     "SGD: invalid weight_decay=-0.5 in param group 0 (must be >= 0)"),
    (lambda p: optim.Adamax(p, lr=-1.0), ValueError,
     "Adamax: invalid lr=-1.0 in param group 0 (must be >= 0)"),
])
def test_option_errors_name_the_optimizer_and_the_option(make, kind, message):
    with pytest.raises(kind, match=f"^{re.escape(message)}$"):
        make([param(1.0)])


@pytest.mark.parametrize("cls,option,value,message", [
    (optim.SGD, "momentum", -0.5, "invalid momentum=-0.5 in param group 1 (must be >= 0)"),
    (optim.SGD, "lr", -1, "invalid lr=-1 in param group 1 (must be >= 0)"),
    (optim.Adam, "eps", -1.0, "invalid eps=-1.0 in param group 1 (must be >= 0)"),
    (optim.AdamW, "lr", -1.0, "invalid lr=-1.0 in param group 1 (must be >= 0)"),
    (optim.Adam, "betas", (0.9, 1.5), "invalid betas[1]=1.5 in param group 1"),
    (optim.NAdam, "momentum_decay", -1.0, "invalid momentum_decay=-1.0 in param group 1"),
    (optim.NAdam, "lr", -1.0, "invalid lr=-1.0 in param group 1"),
    (optim.NAdam, "weight_decay", -1.0, "invalid weight_decay=-1.0 in param group 1"),
])
def test_option_errors_name_the_group(cls, option, value, message):
    opt = cls([param(1.0)])
    with pytest.raises(ValueError, match=f"^{cls.__name__}: {re.escape(message)}"):
        opt.add_param_group({"params": [param(2.0)], option: value})


def test_betas_may_start_at_zero():
    p = param(1.0)
    opt = optim.Adam([p], lr=0.1, betas=(0.0, 0.0))
    grad_of(p, 2.0)
    opt.step()                         # m = g, v = g^2: a step of lr * sign(g)
    assert p.data[0] == pytest.approx(0.9, abs=1e-8)


def test_repr_lists_each_group_options_sorted_without_params():
    a, b = param(1.0), param(2.0)
    opt = optim.SGD([("a", a)], lr=0.1)
    opt.add_param_group({"params": [("b", b)], "lr": 0.5, "nesterov": True, "momentum": 0.9})
    expected = "\n".join([
        "SGD (", "Parameter Group 0", "    dampening: 0", "    lr: 0.1", "    maximize: False",
        "    momentum: 0", "    nesterov: False", "    weight_decay: 0",
        "Parameter Group 1", "    dampening: 0", "    lr: 0.5", "    maximize: False",
        "    momentum: 0.9", "    nesterov: True", "    weight_decay: 0", ")"])
    assert repr(opt) == expected
    assert opt.param_groups[1]["param_names"] == ["b"]


# ----- state_dict / load_state_dict -----------------------------------------------------
def test_load_state_dict_errors_name_the_optimizer():
    opt = optim.Adam([param(1.0)])
    with pytest.raises(ValueError, match=r"^Adam\.load_state_dict: expected a dict with "
                                         r"'state' and 'param_groups', got list$"):
        opt.load_state_dict([])
    with pytest.raises(ValueError, match=r"^Adam\.load_state_dict: the state dict has 0 "
                                         r"parameter groups, this optimizer has 1$"):
        opt.load_state_dict({"state": {}, "param_groups": []})
    with pytest.raises(ValueError, match=r"^Adam\.load_state_dict: state for parameter 3 has "
                                         r"no matching parameter in the param groups$"):
        opt.load_state_dict({"state": {3: {}}, "param_groups": [{"params": [0]}]})


def test_torch_state_loads_in_the_parameters_dtype_as_copies():
    """A float64 torch checkpoint into float32 parameters: floating buffers take the
    parameter's dtype, the step becomes an int, nothing aliases the loaded dict."""
    w = np.array([0.5, -1.0, 2.0])
    t = torch.nn.Parameter(torch.from_numpy(w.copy()))
    t_opt = torch.optim.Adam([t], lr=0.1)
    t.grad = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)
    t_opt.step()
    saved = t_opt.state_dict()
    saved["state"][0] = {k: v.numpy() for k, v in saved["state"][0].items()}
    saved["state"][0]["counts"] = np.array([1, 2], dtype=np.int64)   # a non-float entry
    p = lz.Parameter(w.astype(np.float32))
    opt = optim.Adam([p], lr=0.1)
    opt.load_state_dict(saved)
    state = opt.state[p]
    assert state["step"] == 1 and type(state["step"]) is int
    for key in ("exp_avg", "exp_avg_sq"):
        assert isinstance(state[key], np.ndarray) and state[key].dtype == np.float32
        np.testing.assert_allclose(state[key], saved["state"][0][key], rtol=1e-7)
        assert saved["state"][0][key].dtype == np.float64
    assert state["counts"].dtype == np.int64
    np.testing.assert_array_equal(state["counts"], [1, 2])


def test_loaded_buffers_are_copies_and_variables_are_unwrapped():
    a = param(1.0, 2.0)
    opt = optim.SGD([a], lr=0.1, momentum=0.9)
    buf = np.array([0.5, 0.25])
    wrapped = np.array([7.0, 8.0])
    opt.load_state_dict({"state": {0: {"momentum_buffer": buf,
                                       "extra": lz.Variable(wrapped)}},
                         "param_groups": [{"params": [0], "lr": 0.1}]})
    loaded = opt.state[a]["momentum_buffer"]
    assert isinstance(loaded, np.ndarray) and not np.shares_memory(loaded, buf)
    assert isinstance(opt.state[a]["extra"], np.ndarray)
    np.testing.assert_array_equal(opt.state[a]["extra"], wrapped)
    grad_of(a, 1.0, 1.0)
    opt.step()                                   # buf = 0.9 buf + g
    np.testing.assert_array_equal(buf, [0.5, 0.25])
    np.testing.assert_allclose(loaded, [1.45, 1.225])
    np.testing.assert_allclose(a.data, [1.0 - 0.145, 2.0 - 0.1225])


def test_loaded_scalars_and_options_are_plain_python():
    a = param(1.0)
    opt = optim.Adam([a])
    betas = [0.8, 0.9]                            # a JSON round trip turns tuples into lists
    opt.load_state_dict({"state": {0: {"step": 3.0, "scale": 4.0,
                                       "exp_avg": np.zeros(1), "exp_avg_sq": np.zeros(1)}},
                         "param_groups": [{"params": [0], "lr": np.array(0.05),
                                           "betas": betas}]})
    group = opt.param_groups[0]
    assert type(group["lr"]) is float and group["lr"] == 0.05
    assert group["betas"] == [0.8, 0.9] and group["betas"] is not betas
    assert group["eps"] == 1e-8                   # an option the saved dict lacks is kept
    state = opt.state[a]
    assert type(state["step"]) is int and state["step"] == 3
    assert type(state["scale"]) is float and state["scale"] == 4.0
    grad_of(a, 1.0)
    opt.step()
    assert state["step"] == 4


def test_state_dict_round_trip_continues_the_same_path():
    rng = np.random.default_rng(1)
    w = rng.standard_normal(5)
    grads = rng.standard_normal((6, 5))
    a, b = lz.Parameter(w.copy()), lz.Parameter(w.copy())
    opt_a = optim.NAdam([a], lr=0.05, weight_decay=0.1)
    for g in grads[:3]:
        grad_of(a, *g)
        opt_a.step()
    sd = opt_a.state_dict()
    assert sd["param_groups"][0]["params"] == [0] and "params" not in sd["state"][0]
    b.data[...] = a.data
    opt_b = optim.NAdam([b], lr=0.01)
    opt_b.load_state_dict(sd)
    assert opt_b.param_groups[0]["lr"] == 0.05 and opt_b.param_groups[0]["params"] == [b]
    for g in grads[3:]:
        grad_of(a, *g)
        grad_of(b, *g)
        opt_a.step()
        opt_b.step()
    np.testing.assert_array_equal(a.data, b.data)


# ----- _plain: options as Python numbers -------------------------------------------------
@pytest.mark.parametrize("value,expected", [
    (np.float32(0.5), 0.5), (np.float64(0.25), 0.25), (np.array(0.125), 0.125),
    (lz.Variable(np.array(2.0)), 2.0), (0.75, 0.75),
])
def test_plain_turns_float_options_into_python_floats(value, expected):
    out = _plain(value)
    assert type(out) is float and out == expected


def test_plain_keeps_bools_ints_none_strings_and_maps_tuples():
    assert _plain(True) is True and _plain(False) is False
    assert _plain(None) is None
    assert _plain("nan") == "nan" and _plain("strong_wolfe") == "strong_wolfe"
    assert _plain(3) == 3 and type(_plain(3)) is int
    pair = _plain([np.float32(0.5), 2])
    assert pair == (0.5, 2) and type(pair[0]) is float and type(pair[1]) is int
    odd = object()
    assert _plain(odd) is odd
