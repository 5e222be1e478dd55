"""Every optimizer against torch.optim: ten steps from the same weights and gradients."""
import copy

import numpy as np
import pytest
import torch

import lezero as lz
from lezero import optim

SHAPES = [(3, 4), (5,), ()]
STEPS = 10


@pytest.fixture
def torch_float64():
    """PyTorch keeps counters such as NAdam's mu_product as default-dtype tensors: make
    that float64 so the float64 comparison is not limited by float32 bookkeeping."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(old)


def make_data(dtype, seed=0):
    rng = np.random.default_rng(seed)
    weights = [rng.standard_normal(s).astype(dtype) for s in SHAPES]
    grads = [[rng.standard_normal(s).astype(dtype) for s in SHAPES] for _ in range(STEPS)]
    grads[3][1] = None     # a parameter without a gradient is skipped by both
    return weights, grads


def lz_params(weights):
    return [lz.Parameter(w.copy()) for w in weights]


def torch_params(weights):
    return [torch.nn.Parameter(torch.from_numpy(w.copy())) for w in weights]


def set_grads(params, grads, lib):
    for p, g in zip(params, grads):
        if lib == "lz":
            p.grad = None if g is None else lz.Variable(g.copy(), requires_grad=False)
        else:
            p.grad = None if g is None else torch.from_numpy(g.copy())


def group_spec(params, groups):
    """Split params into param groups: ``groups`` is a list of per-group option dicts."""
    if groups is None:
        return params
    return [dict(params=params[:1], **groups[0]), dict(params=params[1:], **groups[1])]


def run(lib, cls, kwargs, weights, grads, groups=None, steps=range(STEPS), opt=None,
        params=None):
    params = params if params is not None else (
        lz_params(weights) if lib == "lz" else torch_params(weights))
    if opt is None:
        opt = cls(group_spec(params, groups), **kwargs)
    history = []
    for t in steps:
        opt.zero_grad()
        set_grads(params, grads[t], lib)
        opt.step()
        history.append([p.detach().numpy().copy() if lib == "torch" else p.data.copy()
                        for p in params])
    return params, opt, history


def assert_same_path(h_lz, h_torch, atol):
    for t, (a, b) in enumerate(zip(h_lz, h_torch)):
        for i, (x, y) in enumerate(zip(a, b)):
            assert x.dtype == y.dtype
            np.testing.assert_allclose(x, y, rtol=0, atol=atol,
                                       err_msg=f"step {t + 1}, parameter {i}")


CASES = [
    ("SGD", {}),
    ("SGD", dict(lr=0.1, momentum=0.9)),
    ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.3, weight_decay=0.05)),
    ("SGD", dict(lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.1)),
    ("SGD", dict(lr=0.1, maximize=True, weight_decay=0.01)),
    ("Adam", {}),
    ("Adam", dict(lr=0.01, betas=(0.8, 0.95), eps=1e-6, weight_decay=0.1)),
    ("Adam", dict(lr=0.01, amsgrad=True, weight_decay=0.02)),
    ("Adam", dict(lr=0.01, maximize=True, decoupled_weight_decay=True, weight_decay=0.1)),
    ("AdamW", {}),
    ("AdamW", dict(lr=0.01, weight_decay=0.1, amsgrad=True)),
    ("RMSprop", {}),
    ("RMSprop", dict(lr=0.01, alpha=0.9, momentum=0.5, weight_decay=0.1)),
    ("RMSprop", dict(lr=0.01, centered=True)),
    ("RMSprop", dict(lr=0.01, centered=True, momentum=0.9, maximize=True)),
    ("Adagrad", {}),
    ("Adagrad", dict(lr=0.1, lr_decay=0.05, weight_decay=0.1, initial_accumulator_value=0.5)),
    ("Adadelta", {}),
    ("Adadelta", dict(lr=0.5, rho=0.8, eps=1e-5, weight_decay=0.1, maximize=True)),
    ("Adamax", {}),
    ("Adamax", dict(lr=0.01, betas=(0.7, 0.9), weight_decay=0.1)),
    ("NAdam", {}),
    ("NAdam", dict(lr=0.01, weight_decay=0.1, momentum_decay=0.01)),
    ("NAdam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True)),
]
IDS = [f"{name}-{'-'.join(f'{k}={v}' for k, v in kw.items()) or 'defaults'}"
       for name, kw in CASES]


@pytest.mark.parametrize("name,kwargs", CASES, ids=IDS)
def test_matches_torch_float64(name, kwargs, torch_float64):
    weights, grads = make_data(np.float64)
    _, _, h_lz = run("lz", getattr(optim, name), kwargs, weights, grads)
    _, _, h_t = run("torch", getattr(torch.optim, name), kwargs, weights, grads)
    assert not np.array_equal(h_lz[-1][0], weights[0])       # the weights did move
    assert_same_path(h_lz, h_t, atol=1e-12)


@pytest.mark.parametrize("name,kwargs", CASES[::2], ids=IDS[::2])
def test_matches_torch_float32(name, kwargs):
    weights, grads = make_data(np.float32)
    _, _, h_lz = run("lz", getattr(optim, name), kwargs, weights, grads)
    _, _, h_t = run("torch", getattr(torch.optim, name), kwargs, weights, grads)
    assert_same_path(h_lz, h_t, atol=1e-6)


GROUPS = [dict(lr=0.05, weight_decay=0.1), dict(lr=0.01)]


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta",
                                  "Adamax", "NAdam"])
def test_param_groups_match_torch(name, torch_float64):
    weights, grads = make_data(np.float64, seed=1)
    kwargs = dict(momentum=0.9) if name in ("SGD", "RMSprop") else {}
    _, opt, h_lz = run("lz", getattr(optim, name), kwargs, weights, grads, groups=GROUPS)
    _, topt, h_t = run("torch", getattr(torch.optim, name), kwargs, weights, grads,
                       groups=GROUPS)
    assert [g["lr"] for g in opt.param_groups] == [0.05, 0.01]
    assert_same_path(h_lz, h_t, atol=1e-12)
    # the packed state_dict numbers parameters like PyTorch's
    sd, tsd = opt.state_dict(), topt.state_dict()
    assert [g["params"] for g in sd["param_groups"]] == [g["params"] for g in tsd["param_groups"]]
    assert sorted(sd["state"]) == sorted(tsd["state"])
    for i in tsd["state"]:
        assert set(sd["state"][i]) == set(tsd["state"][i])


def lion_reference(weights, grads, lr, betas, wd):
    """Lion as written in the paper (Chen et al. 2023, Algorithm 2), in plain NumPy."""
    b1, b2 = betas
    ws = [w.copy() for w in weights]
    ms = [np.zeros_like(w) for w in weights]
    history = []
    for step_grads in grads:
        for i, g in enumerate(step_grads):
            if g is None:
                continue
            update = np.sign(b1 * ms[i] + (1 - b1) * g)
            ws[i] = ws[i] - lr * (update + wd * ws[i])
            ms[i] = b2 * ms[i] + (1 - b2) * g
        history.append([w.copy() for w in ws])
    return history


@pytest.mark.parametrize("kwargs", [{}, dict(lr=3e-3, betas=(0.95, 0.98), weight_decay=0.5)])
def test_lion_matches_paper(kwargs):
    weights, grads = make_data(np.float64)
    _, _, h_lz = run("lz", optim.Lion, kwargs, weights, grads)
    full = dict(dict(lr=1e-4, betas=(0.9, 0.99), weight_decay=0), **kwargs)
    h_ref = lion_reference(weights, grads, full["lr"], full["betas"], full["weight_decay"])
    assert_same_path(h_lz, h_ref, atol=1e-14)
    if not full["weight_decay"]:     # without decay, every coordinate moves by exactly lr
        np.testing.assert_allclose(np.abs(h_lz[1][0] - h_lz[0][0]), full["lr"], rtol=1e-9)


ALL = [("SGD", dict(lr=0.1, momentum=0.9, nesterov=True)), ("Adam", dict(amsgrad=True)),
       ("AdamW", {}), ("RMSprop", dict(centered=True, momentum=0.5)),
       ("Adagrad", dict(lr_decay=0.1)), ("Adadelta", {}), ("Adamax", {}), ("NAdam", {}),
       ("Lion", dict(weight_decay=0.1))]


@pytest.mark.parametrize("name,kwargs", ALL, ids=[a for a, _ in ALL])
def test_state_dict_resume_is_exact(name, kwargs, tmp_path):
    """Stop after 4 steps, save the optimizer to disk, rebuild everything, continue: the
    weights equal the uninterrupted run's bit for bit."""
    weights, grads = make_data(np.float32)
    cls = getattr(optim, name)
    _, _, full = run("lz", cls, kwargs, weights, grads)
    params, opt, _ = run("lz", cls, kwargs, weights, grads, steps=range(4))
    lz.save({"opt": opt.state_dict(), "w": [p.data for p in params]}, tmp_path / "ck.npz")
    ck = lz.load(tmp_path / "ck.npz")
    fresh = lz_params(ck["w"])
    opt2 = cls(fresh, **kwargs)
    opt2.load_state_dict(ck["opt"])
    assert opt2.param_groups[0]["params"][0] is fresh[0]
    _, _, rest = run("lz", cls, kwargs, weights, grads, steps=range(4, STEPS), opt=opt2,
                     params=fresh)
    for a, b in zip(rest[-1], full[-1]):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name,kwargs", [("SGD", dict(lr=0.1, momentum=0.9)),
                                         ("Adam", dict(amsgrad=True, weight_decay=0.1)),
                                         ("RMSprop", dict(centered=True)), ("NAdam", {}),
                                         ("Adagrad", {}), ("Adamax", {}), ("Adadelta", {})])
def test_loads_torch_optimizer_state(name, kwargs, torch_float64):
    """A PyTorch optimizer's state_dict (tensors as NumPy arrays) continues in LeZero."""
    weights, grads = make_data(np.float64, seed=2)
    _, _, h_t = run("torch", getattr(torch.optim, name), kwargs, weights, grads)
    tparams, topt, _ = run("torch", getattr(torch.optim, name), kwargs, weights, grads,
                           steps=range(5))
    tsd = topt.state_dict()
    sd = {"state": {k: {n: (v.numpy() if torch.is_tensor(v) else v) for n, v in s.items()}
                    for k, s in tsd["state"].items()},
          "param_groups": copy.deepcopy(tsd["param_groups"])}
    params = [lz.Parameter(p.detach().numpy().copy()) for p in tparams]
    opt = getattr(optim, name)(params, **kwargs)
    opt.load_state_dict(sd)
    assert isinstance(opt.state[params[0]].get("step", 5), int)
    _, _, rest = run("lz", None, kwargs, weights, grads, steps=range(5, STEPS), opt=opt,
                     params=params)
    assert_same_path(rest, h_t[5:], atol=1e-12)


def test_optimizers_keep_float32_and_do_not_touch_grad():
    weights, grads = make_data(np.float32)
    for name, kwargs in ALL:
        params = lz_params(weights)
        opt = getattr(optim, name)(params, weight_decay=0.1, **{k: v for k, v in kwargs.items()
                                                                if k != "weight_decay"})
        set_grads(params, grads[0], "lz")
        before = [p.grad.data.copy() for p in params]
        opt.step()
        for p, g in zip(params, before):
            assert p.data.dtype == np.float32, name
            np.testing.assert_array_equal(p.grad.data, g, err_msg=name)
        for s in opt.state.values():
            for v in s.values():
                if isinstance(v, np.ndarray):
                    assert v.dtype == np.float32, name


def test_zero_grad_and_closure():
    p = lz.Parameter(np.array([1.0, -2.0], np.float32))
    opt = optim.SGD([p], lr=0.5)

    def closure():
        opt.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        return loss

    loss = opt.step(closure)
    assert loss.item() == pytest.approx(5.0)
    np.testing.assert_allclose(p.data, [0.0, 0.0])      # p - 0.5 * 2p
    p.grad = lz.Variable(np.ones(2, np.float32))
    grad_array = p.grad.data
    opt.zero_grad(set_to_none=False)
    assert p.grad.data is grad_array and not grad_array.any()
    opt.zero_grad()
    assert p.grad is None


def test_add_param_group_and_named_params():
    a, b = lz.Parameter(np.zeros(2)), lz.Parameter(np.zeros(3))
    opt = optim.Adam([("a", a)], lr=0.1)
    opt.add_param_group({"params": [("b", b)], "lr": 0.2})
    assert [g["lr"] for g in opt.param_groups] == [0.1, 0.2]
    assert opt.param_groups[1]["param_names"] == ["b"]
    assert opt.param_groups[1]["betas"] == (0.9, 0.999)
    with pytest.raises(ValueError, match="more than one parameter group"):
        opt.add_param_group({"params": [a]})
    assert "Parameter Group 1" in repr(opt) and "lr: 0.2" in repr(opt)


@pytest.mark.parametrize("make,message", [
    (lambda p: optim.SGD(p, lr=-0.1), r"lr=-0\.1"),
    (lambda p: optim.SGD(p, momentum=-1), "momentum=-1"),
    (lambda p: optim.SGD(p, nesterov=True), "nesterov"),
    (lambda p: optim.Adam(p, betas=(0.9, 1.0)), r"betas\[1\]=1\.0"),
    (lambda p: optim.Adam(p, eps=-1e-8), "eps=-1e-08"),
    (lambda p: optim.AdamW(p, weight_decay=-0.1), r"weight_decay=-0\.1"),
    (lambda p: optim.Adadelta(p, rho=1.5), r"rho=1\.5"),
    (lambda p: optim.Adagrad(p, lr_decay=-1), "lr_decay=-1"),
    (lambda p: optim.RMSprop(p, alpha=-0.5), "alpha=-0.5"),
    (lambda p: optim.NAdam(p, momentum_decay=-1), "momentum_decay=-1"),
    (lambda p: optim.Lion(p, betas=(1.2, 0.99)), r"betas\[0\]=1\.2"),
    (lambda p: optim.SGD([{"params": p}, {"params": [lz.Parameter(np.zeros(1))],
                                          "lr": -1}]), "lr=-1 in param group 1"),
])
def test_bad_hyperparameters_name_the_value(make, message):
    with pytest.raises(ValueError, match=message):
        make([lz.Parameter(np.zeros(2))])


def test_bad_params():
    p = lz.Parameter(np.zeros(2))
    with pytest.raises(ValueError, match="empty parameter list"):
        optim.SGD([])
    with pytest.raises(TypeError, match="params.1. must be a Parameter or Variable, got ndarray"):
        optim.SGD([p, np.zeros(2)])
    with pytest.raises(TypeError, match="single Parameter"):
        optim.SGD(p)
    with pytest.raises(TypeError, match="not a set"):
        optim.SGD({p})
    with pytest.raises(ValueError, match="not a leaf"):
        optim.SGD([p * 2])
    with pytest.raises(ValueError, match="same parameter twice"):
        optim.SGD([p, p])
    opt = optim.SGD([p], momentum=0.9)
    with pytest.raises(ValueError, match="2 parameter groups"):
        opt.load_state_dict({"state": {}, "param_groups": [{"params": [0]}, {"params": [1]}]})
    with pytest.raises(ValueError, match="holds 2 parameters"):
        opt.load_state_dict({"state": {}, "param_groups": [{"params": [0, 1]}]})
    with pytest.raises(ValueError, match="parameter 7"):
        opt.load_state_dict({"state": {7: {}}, "param_groups": [{"params": [0], "lr": 1}]})


def test_state_dict_is_torch_shaped():
    a, b = lz.Parameter(np.ones(2)), lz.Parameter(np.ones(3))
    opt = optim.SGD([{"params": [a]}, {"params": [b], "lr": 0.5}], lr=0.1, momentum=0.9)
    a.grad = lz.Variable(np.ones(2))
    opt.step()
    sd = opt.state_dict()
    assert sd["param_groups"][0]["params"] == [0] and sd["param_groups"][1]["params"] == [1]
    assert sd["param_groups"][1]["lr"] == 0.5 and sd["param_groups"][0]["momentum"] == 0.9
    assert list(sd["state"]) == [0]                  # b never had a gradient
    np.testing.assert_array_equal(sd["state"][0]["momentum_buffer"], np.ones(2))


@pytest.mark.gpu
@pytest.mark.parametrize("name,kwargs", ALL, ids=[a for a, _ in ALL])
def test_cupy_parameters_match_numpy(name, kwargs, tmp_path):
    """On the GPU every update, and a state_dict loaded from disk, stay on the GPU and
    agree with the NumPy run."""
    import cupy
    weights, grads = make_data(np.float32)
    cls = getattr(optim, name)
    _, _, h_cpu = run("lz", cls, kwargs, weights, grads)
    params = [lz.Parameter(cupy.asarray(w)) for w in weights]
    opt = cls(params, **kwargs)
    for t in range(STEPS):
        opt.zero_grad()
        for p, g in zip(params, grads[t]):
            p.grad = None if g is None else lz.Variable(cupy.asarray(g), requires_grad=False)
        opt.step()
        if t == 4:                    # round trip the state through a file mid-run
            lz.save(opt.state_dict(), tmp_path / "gpu.npz")
            opt = cls(params, **kwargs)
            opt.load_state_dict(lz.load(tmp_path / "gpu.npz"))
        for i, p in enumerate(params):
            assert isinstance(p.data, cupy.ndarray) and p.data.dtype == np.float32
            np.testing.assert_allclose(cupy.asnumpy(p.data), h_cpu[t][i], rtol=0, atol=1e-6,
                                       err_msg=f"{name} step {t + 1} parameter {i}")
    for state in opt.state.values():
        for v in state.values():
            assert not isinstance(v, np.ndarray), "state arrays live on the GPU"


def test_gradient_checks_and_dtype():
    p = lz.Parameter(np.ones(3, np.float32))
    opt = optim.Adam([p], lr=0.1)
    p.grad = lz.Variable(np.ones(2, np.float32))
    with pytest.raises(ValueError, match=r"shape \(3,\) has a gradient of shape \(2,\)"):
        opt.step()
    p.grad = lz.Variable(np.full(3, 300.0, np.float16))     # 300**2 overflows float16
    opt.step()
    assert p.data.dtype == np.float32 and np.isfinite(p.data).all()
    np.testing.assert_allclose(p.data, 0.9, rtol=1e-6)


def test_load_state_dict_keeps_options_the_saved_dict_lacks():
    p = lz.Parameter(np.ones(2))
    opt = optim.Adam([p], lr=0.1, amsgrad=True)
    opt.load_state_dict({"state": {}, "param_groups": [{"lr": 0.5, "params": [0]}]})
    assert opt.param_groups[0]["lr"] == 0.5 and opt.param_groups[0]["amsgrad"] is True
    p.grad = lz.Variable(np.ones(2))
    opt.step()
    assert "max_exp_avg_sq" in opt.state[p]


ADAM_KERNEL_CASES = [("Adam", {}), ("Adam", dict(lr=0.01, maximize=True, weight_decay=0.1)),
                     ("Adam", dict(lr=0.01, amsgrad=True, weight_decay=0.02)),
                     ("AdamW", dict(lr=0.01, weight_decay=0.1, amsgrad=True, maximize=True))]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name,kwargs", ADAM_KERNEL_CASES)
def test_adam_numba_kernel_equals_numpy_path_bit_for_bit(name, kwargs, dtype):
    from lezero.kernels import numba_available
    if not numba_available():
        pytest.skip("Numba is not installed")
    weights, grads = make_data(dtype, seed=3)
    _, _, fused = run("lz", getattr(optim, name), kwargs, weights, grads)
    with lz.using_config("use_numba", False):
        _, _, plain = run("lz", getattr(optim, name), kwargs, weights, grads)
    assert not np.array_equal(fused[-1][0], weights[0])
    for a, b in zip(fused, plain):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)
