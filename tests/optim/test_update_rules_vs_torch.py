"""The update rules of SGD, the Adam family, RMSprop, Adagrad and Adadelta against
torch.optim, option by option.

tests/optim/test_optimizers.py runs ten steps per optimizer over a table of cases; this
file adds the options that table leaves out (AdamW's betas, eps and maximize, NAdam and
Adamax maximizing, Nesterov without weight decay, every state key), and what the update
must not do: write into ``p.grad``, alias a user's gradient array in its buffers.
"""
import numpy as np
import pytest
import torch

import lezero as lz
from lezero import optim

SHAPES = [(2, 3), (4,), ()]
STEPS = 6


@pytest.fixture
def torch_float64():
    """torch keeps NAdam's mu_product in the default dtype: float64 here, as in LeZero."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(old)


def data(dtype=np.float64, seed=3):
    rng = np.random.default_rng(seed)
    weights = [rng.standard_normal(s).astype(dtype) for s in SHAPES]
    grads = [[rng.standard_normal(s).astype(dtype) for s in SHAPES] for _ in range(STEPS)]
    return weights, grads


def lezero_path(name, kwargs, weights, grads):
    params = [lz.Parameter(w.copy()) for w in weights]
    opt = getattr(optim, name)(params, **kwargs)
    path = []
    for step in grads:
        for p, g in zip(params, step):
            p.grad = lz.Variable(g.copy(), requires_grad=False)
        opt.step()
        path.append([p.data.copy() for p in params])
    return opt, path


def torch_path(name, kwargs, weights, grads):
    params = [torch.nn.Parameter(torch.from_numpy(w.copy())) for w in weights]
    opt = getattr(torch.optim, name)(params, **kwargs)
    path = []
    for step in grads:
        for p, g in zip(params, step):
            p.grad = torch.from_numpy(g.copy())
        opt.step()
        path.append([p.detach().numpy().copy() for p in params])
    return opt, path


CASES = [
    ("AdamW", dict(lr=0.02, betas=(0.7, 0.9), eps=1e-3, weight_decay=0.2, maximize=True)),
    ("AdamW", dict(lr=0.02, eps=0.5)),
    ("Adam", dict(lr=0.05, betas=(0.0, 0.9), amsgrad=True, maximize=True)),
    ("NAdam", dict(lr=0.02, maximize=True)),
    ("NAdam", dict(lr=0.02, maximize=True, weight_decay=0.1, decoupled_weight_decay=True)),
    ("Adamax", dict(lr=0.02, maximize=True)),
    ("Adamax", dict(lr=0.02, maximize=True, weight_decay=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True)),
    ("SGD", dict(lr=0.1, momentum=0.5, dampening=0.5, maximize=True)),
    ("SGD", dict(lr=0.1, weight_decay=0.3)),
    # the squared-history rules: no momentum buffer at momentum=0, rho at both ends
    ("RMSprop", dict(lr=0.01, centered=True, maximize=True, eps=1e-3)),
    ("RMSprop", dict(lr=0.01, alpha=0.8, momentum=0.5, weight_decay=0.1)),
    ("Adagrad", dict(lr=0.1, maximize=True, initial_accumulator_value=0.2)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.1, weight_decay=0.1, eps=1e-3)),
    ("Adadelta", dict(lr=0.5, rho=0.0, maximize=True)),
    ("Adadelta", dict(lr=0.5, rho=1.0, weight_decay=0.1)),
]
IDS = [f"{n}-{'-'.join(f'{k}={v}' for k, v in kw.items())}" for n, kw in CASES]


@pytest.mark.parametrize("name,kwargs", CASES, ids=IDS)
def test_update_matches_torch(name, kwargs, torch_float64):
    weights, grads = data()
    opt_lz, path_lz = lezero_path(name, kwargs, weights, grads)
    opt_t, path_t = torch_path(name, kwargs, weights, grads)
    for t, (a, b) in enumerate(zip(path_lz, path_t)):
        for i, (x, y) in enumerate(zip(a, b)):
            assert x.shape == y.shape and x.dtype == y.dtype
            np.testing.assert_allclose(x, y, rtol=0, atol=1e-12,
                                       err_msg=f"{name} step {t + 1} parameter {i}")
    # the same state entries as torch, buffer for buffer
    for p_lz, p_t in zip(opt_lz.param_groups[0]["params"], opt_t.param_groups[0]["params"]):
        s_lz, s_t = opt_lz.state[p_lz], opt_t.state[p_t]
        assert set(s_lz) - {"mu_product"} == set(s_t) - {"mu_product"}
        for key, value in s_t.items():
            if key not in ("step", "mu_product"):
                np.testing.assert_allclose(s_lz[key], value.numpy(), rtol=0, atol=1e-12)
        assert s_lz.get("step", STEPS) == STEPS


NO_COPY_CASES = [
    ("SGD", {}), ("SGD", dict(momentum=0.9)), ("SGD", dict(momentum=0.9, nesterov=True)),
    ("Adam", {}), ("Adam", dict(amsgrad=True)), ("AdamW", {}), ("NAdam", {}),
    ("Adamax", {}), ("NAdam", dict(maximize=True)), ("SGD", dict(maximize=True)),
]


@pytest.mark.parametrize("name,kwargs", NO_COPY_CASES)
def test_step_never_writes_or_keeps_the_users_gradient(name, kwargs):
    """No weight decay and no maximize: the rule sees ``p.grad``'s own memory, which it
    must neither write nor keep as a buffer (SGD's first momentum buffer is a copy)."""
    weights, grads = data()
    params = [lz.Parameter(w.copy()) for w in weights]
    opt = getattr(optim, name)(params, lr=0.1, **kwargs)
    first = [g.copy() for g in grads[0]]
    arrays = [g.copy() for g in grads[0]]
    for p, a in zip(params, arrays):
        p.grad = lz.Variable(a, requires_grad=False)
    opt.step()
    for p, a in zip(params, arrays):
        p.grad = lz.Variable(a.copy() * 2.0, requires_grad=False)    # a new array
    opt.step()
    for a, f in zip(arrays, first):
        np.testing.assert_array_equal(a, f)
    for s in opt.state.values():
        for v in s.values():
            if isinstance(v, np.ndarray):
                assert not any(np.shares_memory(v, a) for a in arrays)


def test_adam_amsgrad_switched_on_mid_run():
    """Turning amsgrad on after some steps starts ``max_exp_avg_sq`` from the current
    second moment (torch raises a KeyError there); the step is then the AMSGrad one."""
    w = np.array([0.5, -1.0, 2.0])
    p = lz.Parameter(w.copy())
    opt = optim.Adam([p], lr=0.1, betas=(0.5, 0.5))
    big, small = np.array([4.0, -3.0, 2.0]), np.array([0.1, 0.2, -0.1])
    p.grad = lz.Variable(big, requires_grad=False)
    opt.step()
    m, v = 0.5 * big, 0.5 * big ** 2
    after_one = p.data.copy()
    opt.param_groups[0]["amsgrad"] = True
    p.grad = lz.Variable(small, requires_grad=False)
    opt.step()
    m = 0.5 * m + 0.5 * small
    v_new = 0.5 * v + 0.5 * small ** 2
    v_max = np.maximum(v, v_new)           # the copy of v before this step, then the max
    state = opt.state[p]
    np.testing.assert_allclose(state["max_exp_avg_sq"], v_max, rtol=1e-15)
    np.testing.assert_allclose(state["exp_avg_sq"], v_new, rtol=1e-15)
    assert set(state) == {"step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"}
    expected = after_one - 0.1 / (1 - 0.25) * m / (np.sqrt(v_max) / np.sqrt(1 - 0.25) + 1e-8)
    np.testing.assert_allclose(p.data, expected, rtol=1e-14)


@pytest.mark.parametrize("name,kwargs", [("SGD", dict(lr=0.3)),
                                         ("SGD", dict(lr=0.3, momentum=0.9)),
                                         ("Adam", dict(lr=0.3))])
def test_float16_gradients_are_cast_to_the_parameter_dtype(name, kwargs):
    """A float16 gradient of a float32 weight updates exactly as its float32 cast."""
    rng = np.random.default_rng(5)
    w = rng.standard_normal(64).astype(np.float32)
    grads = [rng.standard_normal(64).astype(np.float16) for _ in range(3)]
    a, b = lz.Parameter(w.copy()), lz.Parameter(w.copy())
    opt_a, opt_b = getattr(optim, name)([a], **kwargs), getattr(optim, name)([b], **kwargs)
    for g in grads:
        a.grad = lz.Variable(g, requires_grad=False)
        b.grad = lz.Variable(g.astype(np.float32), requires_grad=False)
        opt_a.step()
        opt_b.step()
        assert a.data.dtype == np.float32
        np.testing.assert_array_equal(a.data, b.data)
