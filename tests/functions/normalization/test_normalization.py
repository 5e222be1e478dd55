"""Normalization operators: central differences (float64), double backward, PyTorch parity
(float32), running-statistics updates and bad inputs."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import lezero as lz
import lezero.functions as F
from lezero.testing import check_all, check_gradient, check_torch, rand


def T(a):
    return torch.tensor(np.asarray(a, dtype=np.float32))


# ----- batch_norm ------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(5, 3), (4, 3, 2), (2, 3, 2, 2)])
def test_batch_norm_training(shape):
    x = rand(*shape, seed=1)
    w, b = rand(3, low=0.5, high=1.5, seed=2), rand(3, seed=3)
    check_all(lambda a, g, c: F.batch_norm(a, None, None, g, c, training=True),
              lambda a, g, c: TF.batch_norm(a, None, None, g, c, training=True), x, w, b)


def test_batch_norm_training_without_affine_and_with_weight_only():
    x = rand(4, 3, 2, seed=4)
    check_all(lambda a: F.batch_norm(a, None, None, training=True, eps=1e-3),
              lambda a: TF.batch_norm(a, None, None, training=True, eps=1e-3), x)
    check_all(lambda a, g: F.batch_norm(a, None, None, g, training=True),
              lambda a, g: TF.batch_norm(a, None, None, g, training=True), x, rand(3, seed=5))


def test_batch_norm_evaluation_uses_running_stats():
    x = rand(4, 3, 2, seed=6)
    rm, rv = rand(3, seed=7), rand(3, low=0.5, high=2.0, seed=8)
    w, b = rand(3, seed=9), rand(3, seed=10)

    def ours(a, g, c):
        return F.batch_norm(a, rm.astype(a.dtype), rv.astype(a.dtype), g, c)
    check_all(ours, lambda a, g, c: TF.batch_norm(a, T(rm), T(rv), g, c), x, w, b)
    check_all(lambda a: F.batch_norm(a, rm.astype(a.dtype), rv.astype(a.dtype)),
              lambda a: TF.batch_norm(a, T(rm), T(rv)), x)


def test_batch_norm_running_stats_updated_in_place_like_torch():
    rng = np.random.default_rng(11)
    rm, rv = np.zeros(3, np.float32), np.ones(3, np.float32)
    held = lz.Variable(np.zeros(3, np.float32))            # stats may also live in Variables
    t_rm, t_rv = torch.zeros(3), torch.ones(3)
    ids = (id(rm), id(rv))
    for step in range(4):
        x = rng.normal(step, 1 + step, size=(4, 3, 2, 2)).astype(np.float32)
        F.batch_norm(x, rm, rv, training=True, momentum=0.3)
        F.batch_norm(x, held, None, training=True, momentum=0.3)
        TF.batch_norm(torch.tensor(x), t_rm, t_rv, training=True, momentum=0.3)
    assert (id(rm), id(rv)) == ids
    np.testing.assert_allclose(rm, t_rm.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(rv, t_rv.numpy(), rtol=1e-5)
    np.testing.assert_allclose(held.data, t_rm.numpy(), rtol=1e-5, atol=1e-6)
    assert not np.allclose(rv, 1.0)       # the updates really happened


def test_batch_norm_running_stats_update_under_no_grad_and_not_in_eval():
    x = rand(4, 2, seed=12, dtype=np.float32)
    rm, rv = np.zeros(2, np.float32), np.ones(2, np.float32)
    with lz.no_grad():
        F.batch_norm(x, rm, rv, training=True, momentum=1.0)
    np.testing.assert_allclose(rm, x.mean(axis=0), rtol=1e-6)
    np.testing.assert_allclose(rv, x.var(axis=0, ddof=1), rtol=1e-5)
    before = rm.copy()
    F.batch_norm(x * 3, rm, rv, training=False)
    np.testing.assert_array_equal(rm, before)


def test_batch_norm_third_derivative():
    x, v, u = rand(3, 2, seed=13), rand(3, 2, seed=14), rand(3, 2, seed=15)

    def second(a):
        g, = lz.grad(F.sum(F.batch_norm(a, None, None, training=True) * v), a,
                     create_graph=True)
        h, = lz.grad(F.sum(g * g), a, create_graph=True)
        return F.sum(h * u)
    check_gradient(second, x, rtol=1e-4, atol=1e-6)


# ----- layer / group / instance / RMS norm -----------------------------------------------

@pytest.mark.parametrize("normalized_shape", [4, (3, 4), (2, 3, 4)])
def test_layer_norm(normalized_shape):
    x = rand(2, 3, 4, seed=16)
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else normalized_shape
    w, b = rand(*shape, low=0.5, high=1.5, seed=17), rand(*shape, seed=18)
    check_all(lambda a, g, c: F.layer_norm(a, normalized_shape, g, c),
              lambda a, g, c: TF.layer_norm(a, shape, g, c), x, w, b)


def test_layer_norm_without_affine_and_1d_input():
    check_all(lambda a: F.layer_norm(a, [5], eps=1e-3),
              lambda a: TF.layer_norm(a, [5], eps=1e-3), rand(5, seed=19))
    check_all(lambda a, c: F.layer_norm(a, (4,), bias=c),
              lambda a, c: TF.layer_norm(a, (4,), bias=c), rand(3, 4, seed=20), rand(4, seed=21))


@pytest.mark.parametrize("shape,groups", [((2, 4, 3), 2), ((3, 4), 2), ((1, 6, 2, 2), 3),
                                          ((3, 4, 2), 1)])
def test_group_norm(shape, groups):
    x = rand(*shape, seed=22)
    c = shape[1]
    w, b = rand(c, low=0.5, high=1.5, seed=23), rand(c, seed=24)
    check_all(lambda a, g, h: F.group_norm(a, groups, g, h),
              lambda a, g, h: TF.group_norm(a, groups, g, h), x, w, b)


def test_instance_norm():
    x = rand(2, 3, 4, seed=25)
    w, b = rand(3, low=0.5, high=1.5, seed=26), rand(3, seed=27)
    check_all(lambda a, g, c: F.instance_norm(a, weight=g, bias=c),
              lambda a, g, c: TF.instance_norm(a, weight=g, bias=c), x, w, b)
    check_all(lambda a: F.instance_norm(a, eps=1e-3), lambda a: TF.instance_norm(a, eps=1e-3),
              rand(2, 2, 2, 2, seed=28))


def test_instance_norm_running_stats_like_torch():
    rng = np.random.default_rng(29)
    rm, rv = np.zeros(3, np.float32), np.ones(3, np.float32)
    t_rm, t_rv = torch.zeros(3), torch.ones(3)
    for step in range(3):
        x = rng.normal(step, 2.0, size=(2, 3, 5)).astype(np.float32)
        F.instance_norm(x, rm, rv, momentum=0.2)
        TF.instance_norm(torch.tensor(x), t_rm, t_rv, momentum=0.2)
    np.testing.assert_allclose(rm, t_rm.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(rv, t_rv.numpy(), rtol=1e-5)
    x = rand(2, 3, 5, seed=30)
    check_all(lambda a: F.instance_norm(a, rm.astype(a.dtype), rv.astype(a.dtype),
                                        use_input_stats=False),
              lambda a: TF.instance_norm(a, T(rm), T(rv), use_input_stats=False), x)


@pytest.mark.parametrize("normalized_shape,eps", [((4,), None), ((3, 4), 1e-3)])
def test_rms_norm(normalized_shape, eps):
    x = rand(2, 3, 4, seed=31)
    w = rand(*normalized_shape, low=0.5, high=1.5, seed=32)
    check_all(lambda a, g: F.rms_norm(a, normalized_shape, g, eps=eps),
              lambda a, g: TF.rms_norm(a, normalized_shape, g, eps=eps), x, w)
    check_all(lambda a: F.rms_norm(a, normalized_shape, eps=eps),
              lambda a: TF.rms_norm(a, normalized_shape, eps=eps), x)


def test_rms_norm_default_eps_is_the_dtype_epsilon():
    x = np.zeros((1, 3), np.float32)
    x[0, 0] = 1e-4                      # mean(x**2) = 3.3e-9, comparable to float32's eps
    out = F.rms_norm(x, (3,)).data
    expected = 1e-4 / np.sqrt(np.float32(1e-8) / 3 + np.finfo(np.float32).eps)
    np.testing.assert_allclose(out[0, 0], expected, rtol=1e-5)


@pytest.mark.parametrize("name,call", [
    ("batch_norm", lambda a, w, b: F.batch_norm(a, None, None, w, b, training=True)),
    ("layer_norm", lambda a, w, b: F.layer_norm(a, (3, 2), w.reshape(3, 1) + w[:2] * 0,
                                                b.reshape(3, 1) + b[:2] * 0)),
    ("group_norm", lambda a, w, b: F.group_norm(a, 3, w, b)),
    ("instance_norm", lambda a, w, b: F.instance_norm(a, weight=w, bias=b)),
    ("rms_norm", lambda a, w, b: F.rms_norm(a, (2,), w[:2])),
])
def test_fused_backward_and_differentiable_backward_agree(name, call):
    """The first-order gradient from saved statistics equals the create_graph one."""
    x = lz.Variable(rand(4, 3, 2, seed=33))
    w, b = lz.Variable(rand(3, seed=34)), lz.Variable(rand(3, seed=35))
    gy = rand(4, 3, 2, seed=36)
    fast = lz.grad(call(x, w, b), [x, w, b], grad_outputs=gy, allow_unused=True)
    graph = lz.grad(call(x, w, b), [x, w, b], grad_outputs=gy, allow_unused=True,
                    create_graph=True)
    assert graph[0].creator is not None       # really the differentiable path
    for f, g in zip(fast, graph):
        if f is None:
            assert g is None
            continue
        np.testing.assert_allclose(f.data, g.data, rtol=1e-10, atol=1e-12)


# ----- local_response_norm, normalize ----------------------------------------------------

@pytest.mark.parametrize("shape,size", [((2, 5, 3), 3), ((2, 5, 3), 2), ((1, 4, 2, 2), 5),
                                        ((1, 3, 2, 1, 2), 1)])
def test_local_response_norm(shape, size):
    x = rand(*shape, seed=37)
    kw = {"alpha": 0.5, "beta": 0.75, "k": 1.5}
    check_all(lambda a: F.local_response_norm(a, size, **kw),
              lambda a: TF.local_response_norm(a, size, **kw), x)


@pytest.mark.parametrize("p,axis", [(2.0, 1), (1, 0), (3, -1), (float("inf"), 1)])
def test_normalize(p, axis):
    check_all(lambda a: F.normalize(a, p=p, axis=axis),
              lambda a: TF.normalize(a, p=p, dim=axis), rand(3, 4, 2, seed=38))


def test_normalize_zero_vector_has_a_finite_gradient():
    x = np.zeros((2, 3), np.float32)
    x[1] = [1.0, 2.0, 2.0]
    check_torch(lambda a: F.normalize(a, axis=1), lambda a: TF.normalize(a, dim=1), x)
    np.testing.assert_allclose(F.normalize(x).data[1], [1 / 3, 2 / 3, 2 / 3], rtol=1e-6)


def test_normalization_on_gpu(xp):
    x = rand(4, 3, 2, seed=39, dtype=np.float32)
    check_torch(lambda a: F.batch_norm(a, None, None, training=True),
                lambda a: TF.batch_norm(a, None, None, training=True), x, xp=xp)
    check_torch(lambda a: F.layer_norm(a, (3, 2)), lambda a: TF.layer_norm(a, (3, 2)), x, xp=xp)
    check_torch(lambda a: F.local_response_norm(a, 2), lambda a: TF.local_response_norm(a, 2),
                x, xp=xp)


# ----- dtype and bad inputs --------------------------------------------------------------------

def test_float32_in_float32_out():
    x = lz.Variable(rand(2, 4, 3, seed=40, dtype=np.float32))
    w = np.ones(4, np.float32)
    outs = [F.batch_norm(x, None, None, w, w, training=True),
            F.batch_norm(x, np.zeros(4, np.float32), np.ones(4, np.float32), w, w),
            F.layer_norm(x, 3), F.group_norm(x, 2, w, w), F.instance_norm(x, weight=w),
            F.rms_norm(x, 3), F.local_response_norm(x, 2), F.normalize(x)]
    for out in outs:
        assert out.dtype == np.float32
        F.sum(out).backward()
        assert x.grad.dtype == np.float32
        x.cleargrad()


def test_bad_inputs():
    x = np.zeros((2, 4, 3), np.float32)
    with pytest.raises(ValueError, match=r"batch_norm: input must be \(N, C, ...\), got "
                                         r"shape \(4,\)"):
        F.batch_norm(x[0, :, 0], None, None, training=True)
    with pytest.raises(ValueError, match="batch_norm: expected more than 1 value per channel"):
        F.batch_norm(x[:1, :, :1], None, None, training=True)
    with pytest.raises(ValueError, match="running_mean and running_var are required"):
        F.batch_norm(x, None, None)
    with pytest.raises(ValueError, match=r"running_var must have shape \(4,\), got \(3,\)"):
        F.batch_norm(x, np.zeros(4, np.float32), np.ones(3, np.float32))
    with pytest.raises(ValueError, match=r"batch_norm: weight must have shape \(4,\)"):
        F.batch_norm(x, None, None, np.ones(3, np.float32), training=True)
    with pytest.raises(TypeError, match="momentum=None"):
        F.batch_norm(x, None, None, training=True, momentum=None)
    with pytest.raises(ValueError, match="momentum must be in"):
        F.batch_norm(x, None, None, training=True, momentum=1.5)
    with pytest.raises(ValueError, match=r"layer_norm: normalized_shape \(4,\) must equal the "
                                         r"input's trailing dims"):
        F.layer_norm(x, 4)
    with pytest.raises(TypeError, match="layer_norm: normalized_shape must be an int"):
        F.layer_norm(x, 3.0)
    with pytest.raises(ValueError, match=r"layer_norm: bias must have shape \(3,\)"):
        F.layer_norm(x, 3, bias=np.ones(4, np.float32))
    with pytest.raises(TypeError, match="layer_norm: weight has dtype float64"):
        F.layer_norm(x, 3, np.ones(3))
    with pytest.raises(ValueError, match="group_norm: num_groups must be a positive divisor "
                                         "of the 4 channels, got 3"):
        F.group_norm(x, 3)
    with pytest.raises(ValueError, match="instance_norm: expected more than 1 spatial"):
        F.instance_norm(x[:, :, :1])
    with pytest.raises(ValueError, match="local_response_norm: size must be positive, got 0"):
        F.local_response_norm(x, 0)
    with pytest.raises(TypeError, match="local_response_norm: size must be an int, got float"):
        F.local_response_norm(x, 2.0)
    with pytest.raises(TypeError, match="batch_norm: training must be a bool, got str"):
        F.batch_norm(x, None, None, training="yes")
    with pytest.raises(TypeError, match="instance_norm: use_input_stats must be a bool"):
        F.instance_norm(x, use_input_stats=1)
    with pytest.raises(ValueError, match=r"local_response_norm: input must be"):
        F.local_response_norm(x[0], 2)
    with pytest.raises(ValueError, match="normalize: axis 3 is out of range"):
        F.normalize(x, axis=3)
    with pytest.raises(ValueError, match="normalize: p must be in"):
        F.normalize(x, p=0)
    with pytest.raises(TypeError, match="rms_norm: input must be floating point"):
        F.rms_norm(x.astype(np.int32), 3)


# ----- the Numba kernel against the NumPy reference --------------------------------------

@pytest.mark.parametrize("op", ["layer_norm", "rms_norm"])
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm_kernel_matches_numpy_reference(op, affine):
    pytest.importorskip("numba")
    from lezero.functions.normalization.fused import Normalize
    x = rand(3, 5, 8, seed=41, dtype=np.float32) * 4 + 1
    gy = rand(3, 5, 8, seed=42, dtype=np.float32)
    params = [lz.Variable(rand(5, 8, seed=43, dtype=np.float32))] if affine else []
    if affine and op == "layer_norm":
        params.append(lz.Variable(rand(5, 8, seed=44, dtype=np.float32)))
    results = []
    for use_numba in (True, False):
        with lz.using_config("use_numba", use_numba):
            v = lz.Variable(x)
            y = getattr(F, op)(v, (5, 8), *params)
            assert isinstance(y.creator, Normalize) and y.creator.use_kernel == use_numba
            results.append([y.data] + [g.data for g in lz.grad(y, [v] + params,
                                                               grad_outputs=gy)])
    for kernel, reference in zip(*results):
        assert kernel.dtype == np.float32
        np.testing.assert_allclose(kernel, reference, rtol=1e-5, atol=1e-5)
