"""Fake quantization: values and straight-through gradients equal PyTorch's; the LSQ
gradients equal PyTorch's learnable fake quantization and the analytic formula."""
import numpy as np
import pytest

import lezero as lz
from lezero import quantization as Q
from lezero.testing import check_torch

torch = pytest.importorskip("torch")
RNG = np.random.default_rng(2)


def _x():
    x = (RNG.standard_normal((3, 4, 5)) * 3).astype(np.float32)
    x[0, 0, :4] = [0.05, 0.15, 0.25, -0.35]      # ties of x / scale
    return x


def test_per_tensor_equals_torch_values_and_ste():
    x = _x()
    check_torch(lambda v: Q.fake_quantize(v, np.float32(0.1), 7, 0, 63),
                lambda t: torch.fake_quantize_per_tensor_affine(t, 0.1, 7, 0, 63), x,
                rtol=0, atol=0)
    y = Q.FakeQuantizeAffine(np.float32(0.1), 7, 0, 63)
    v = lz.Variable(x)
    out = y(v)
    out.backward(grad=np.ones_like(x))
    q = np.rint(x * np.float32(10.0)) + 7       # outside [0, 63] -> no gradient
    np.testing.assert_array_equal(v.grad.data, ((q >= 0) & (q <= 63)).astype(np.float32))
    assert 0 < v.grad.data.sum() < x.size


def test_per_channel_equals_torch():
    x = _x()
    scale = np.array([0.1, 0.2, 0.05, 0.3], np.float32)
    zp = np.array([0, 3, -2, 5], np.int32)
    check_torch(lambda v: Q.fake_quantize(v, scale, zp, -8, 7, axis=1),
                lambda t: torch.fake_quantize_per_channel_affine(
                    t, torch.tensor(scale), torch.tensor(zp), 1, -8, 7), x, rtol=0, atol=0)


def test_learnable_equals_torch():
    x = _x()
    s, z = np.array([0.2], np.float32), np.array([3.0], np.float32)
    check_torch(lambda v, a, b: Q.FakeQuantizeLearnable(0, 31, 0.37)(v, a, b),
                lambda t, a, b: torch._fake_quantize_learnable_per_tensor_affine(
                    t, a, b, 0, 31, 0.37), x, s, z, rtol=1e-5, atol=1e-5)
    sc = np.array([0.1, 0.2, 0.05, 0.3], np.float32)
    zc = np.array([0.0, 3.0, -2.0, 5.0], np.float32)
    check_torch(lambda v, a, b: Q.FakeQuantizeLearnable(-8, 7, 0.5, axis=1)(v, a, b),
                lambda t, a, b: torch._fake_quantize_learnable_per_channel_affine(
                    t, a, b, 1, -8, 7, 0.5), x, sc, zc, rtol=1e-5, atol=1e-5)


def test_lsq_scale_gradient_is_the_lsq_formula():
    x = _x().astype(np.float64)
    s, z, lo, hi = 0.25, 2.0, 0, 15
    xs, ss, zs = lz.Variable(x), lz.Variable(np.array([s])), lz.Variable(np.array([z]))
    y = Q.FakeQuantizeLearnable(lo, hi, 1.0)(xs, ss, zs)
    y.backward(grad=np.ones_like(x))
    q = np.rint(x / s) + z
    inside = (q >= lo) & (q <= hi)
    want_s = np.where(q < lo, lo - z, np.where(q > hi, hi - z, np.rint(x / s) - x / s)).sum()
    want_z = np.where(inside, 0.0, -s).sum()
    np.testing.assert_allclose(ss.grad.data, [want_s], rtol=1e-5)
    np.testing.assert_allclose(zs.grad.data, [want_z], rtol=1e-6)
    np.testing.assert_array_equal(xs.grad.data, inside.astype(np.float64))
    # away from rounding boundaries the scale gradient is the true derivative of the
    # clipped part: a central difference on the saturated values agrees
    sat = ~inside
    eps = 1e-6
    up = Q.FakeQuantizeLearnable(lo, hi)(x, np.array([s + eps]), np.array([z])).data
    down = Q.FakeQuantizeLearnable(lo, hi)(x, np.array([s - eps]), np.array([z])).data
    np.testing.assert_allclose(((up - down) / (2 * eps))[sat].sum(),
                               np.where(q < lo, lo - z, hi - z)[sat].sum(), rtol=1e-6)


def test_fake_quantize_module_follows_torch():
    ours = Q.FakeQuantize(quant_min=0, quant_max=255)
    theirs = torch.ao.quantization.FakeQuantize(quant_min=0, quant_max=255)
    for i in range(3):
        x = (RNG.standard_normal((8, 4)) * (i + 1)).astype(np.float32)
        np.testing.assert_array_equal(ours(x).data, theirs(torch.tensor(x)).numpy())
    np.testing.assert_array_equal(ours.scale, theirs.scale.numpy())
    np.testing.assert_array_equal(ours.zero_point, theirs.zero_point.numpy())


def test_switches():
    fq = Q.FakeQuantize()
    model = lz.nn.Sequential(lz.nn.Linear(3, 3), fq)
    x = np.array([[0.013, -1.0, 2.0]], np.float32)
    Q.disable_fake_quant(model)
    assert fq(x) is x                           # no rounding: the input itself
    assert fq.activation_post_process.has_data()
    Q.disable_observer(model)
    before = fq.scale.copy()
    fq(x * 10)
    np.testing.assert_array_equal(fq.scale, before)   # observer off: scale frozen
    Q.enable_fake_quant(model)
    assert not np.array_equal(fq(x).data, x)
    Q.enable_observer(model)
    fq(x * 10)
    assert fq.scale[0] > before[0]
    with pytest.raises(TypeError, match="enabled"):
        fq.enable_observer(1)


def test_learnable_fake_quantize_learns_its_scale():
    lz.manual_seed(0)
    fq = Q.LearnableFakeQuantize(quant_min=0, quant_max=15)
    x = np.abs(RNG.standard_normal(256)).astype(np.float32)
    fq(x)                                        # init_steps=1: scale from the observer
    assert not fq.observer_enabled[0]
    s0 = float(fq.scale.data[0])
    np.testing.assert_allclose(s0, x.max() / 15, rtol=1e-6)
    opt = lz.optim.SGD(fq.parameters(), lr=0.05)
    for _ in range(30):                          # LSQ lowers the MSE of the 4-bit grid
        loss = ((fq(x) - x) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    err0 = np.mean((Q.fake_quantize(x, np.float32(s0), 0, 0, 15).data - x) ** 2)
    assert float(loss.data) < err0 and float(fq.scale.data[0]) < s0


@pytest.mark.gpu
def test_fake_quantize_and_observers_on_cupy():
    import cupy
    x = _x()
    fq = Q.FakeQuantize(quant_min=0, quant_max=255)
    cpu = Q.FakeQuantize(quant_min=0, quant_max=255)
    np.testing.assert_array_equal(cupy.asnumpy(fq(cupy.asarray(x)).data), cpu(x).data)
    np.testing.assert_array_equal(cupy.asnumpy(fq.scale), cpu.scale)
