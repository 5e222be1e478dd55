"""prepare / calibrate / convert and prepare_qat: which modules change, the INT8 model
against the float and the fake-quantized ones, the Numba path against the NumPy one."""
import numpy as np
import pytest

import lezero as lz
import lezero.functions as F
from lezero import nn
from lezero import quantization as Q

from tests.quantization._models import data, ptq, run, small_cnn, warm


@pytest.fixture(scope="module")
def trained():
    lz.manual_seed(0)
    x, _ = data()
    return warm(small_cnn(), x), x


def test_prepare_puts_observers_on_outputs(trained):
    model, x = trained
    prepared = Q.prepare(Q.fuse(model))
    seq = prepared.module
    observed = {name for name, m in prepared.named_modules()
                if "activation_post_process" in m._modules}
    assert observed == {"quant", "module.0", "module.4", "module.8", "module.10"}
    assert isinstance(seq[0].activation_post_process, Q.MinMaxObserver)
    assert "module.0.activation_post_process.min_val" in prepared.state_dict()
    assert "activation_post_process" not in model.module[0]._modules   # a copy
    np.testing.assert_allclose(run(prepared, x), run(Q.fuse(model), x), rtol=1e-6)


def test_convert_swaps_modules_and_stays_close_to_float(trained):
    model, x = trained
    prepared, int8 = ptq(model, x)
    kinds = [type(m).__name__ for m in int8.module]
    assert kinds == ["QuantConvReLU2d", "Identity", "Identity", "QuantMaxPool2d",
                     "QuantConvReLU2d", "Identity", "QuantAdaptiveAvgPool2d", "Flatten",
                     "QuantLinearReLU", "Identity", "QuantLinear"]
    assert isinstance(int8.quant, Q.Quantize) and isinstance(int8.dequant, Q.DeQuantize)
    assert int8.module[0].weight.dtype == np.int8
    ref, got = run(model, x), run(int8, x)
    assert got.dtype == np.float32
    err = np.abs(got - ref).max() / np.abs(ref).max()
    assert err < 0.05, err
    with lz.no_grad():
        hidden = int8.module[:4](int8.quant(x))
    assert isinstance(hidden, Q.QTensor) and hidden.dtype == np.uint8
    assert "scale=" in repr(hidden) and hidden.dequantize().dtype == np.float32


def test_numba_and_numpy_paths_agree(trained):
    model, x = trained
    _, int8 = ptq(model, x)
    fast = run(int8, x)
    with lz.using_config("use_numba", False):
        slow = run(int8, x)
    np.testing.assert_array_equal(fast, slow)


def _qat_model(x, steps=4):
    lz.manual_seed(1)
    qat = Q.prepare_qat(Q.fuse(small_cnn(), qat=True))
    assert isinstance(qat.module[0], Q.QATConvBnReLU2d)
    assert isinstance(qat.module[8], Q.QATLinearReLU)
    assert isinstance(qat.module[0].activation_post_process, Q.FakeQuantize)
    opt = lz.optim.SGD(qat.parameters(), lr=0.05)
    t = (x[:, 0, 0, 0] > 0).astype(np.int64)
    for step in range(steps):
        if step == steps - 1:
            Q.freeze_bn_stats(qat)
        loss = F.cross_entropy(qat(x), t)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert qat.module[0].weight.grad is not None
    return Q.disable_observer(qat.eval())


def test_int8_model_agrees_with_fake_quantized_model_within_one_step():
    x, _ = data(48, seed=5)
    qat = _qat_model(x)
    int8 = Q.convert(qat)
    fake, real = run(qat, x), run(int8, x)
    step = float(int8.module[10].scale)
    diff = np.abs(fake - real) / step
    assert diff.max() <= 1.0 + 1e-3, diff.max()
    assert diff.mean() < 0.4                         # and most agree exactly


def test_freeze_bn_stats_and_qat_bn_folding():
    x, _ = data(8)
    qat = Q.prepare_qat(Q.fuse(small_cnn(), qat=True))
    layer = qat.module[0]
    Q.disable_fake_quant(qat)
    mean0 = layer.bn.running_mean.copy()
    qat(x)
    assert not np.array_equal(layer.bn.running_mean, mean0)       # training updates
    Q.freeze_bn_stats(qat)
    mean1 = layer.bn.running_mean.copy()
    qat(x)
    np.testing.assert_array_equal(layer.bn.running_mean, mean1)   # frozen
    Q.update_bn_stats(qat)
    # with fake quantization off, the QAT conv-bn equals conv then bn in eval mode
    qat.eval()
    conv = nn.Conv2d(2, 6, 3, padding=1)
    conv.weight.data, conv.bias.data = layer.weight.data, layer.bias.data
    ref = run(nn.Sequential(conv, layer.bn, nn.ReLU()).eval(), x)
    np.testing.assert_allclose(run(layer, x), ref, rtol=1e-5, atol=1e-5)


def test_float_and_quantized_tensors_in_the_wrong_place(trained):
    model, x = trained
    _, int8 = ptq(model, x)
    with pytest.raises(Q.QuantizationTypeError, match=r"QuantConvReLU2d 'module.0'"
                       r".*float.*QuantStub"):
        with lz.no_grad():
            int8.module(x)                       # skipping the QuantStub
    model.module[10].qconfig = None        # the last Linear stays float
    _, mixed = ptq(model, x)
    del model.module[10].qconfig
    with pytest.raises(Q.QuantizationTypeError, match=r"Linear 'module.10'.*quantized"
                       r".*DeQuantStub"):
        run(mixed, x)
    with lz.no_grad():
        q = int8.quant(x)
    with pytest.raises(Q.QuantizationTypeError, match="FloatFunctional"):
        q + q
    with pytest.raises(Q.QuantizationTypeError, match="without quantization parameters"):
        int8.module[0](F.concatenate([q, q]))    # an operator made new integers
    with pytest.raises(Q.QuantizationTypeError, match="one too many"):
        int8.quant(q)
    with pytest.raises(TypeError, match="qconfig"):
        Q.prepare(model, qconfig="int8")
    with pytest.warns(UserWarning, match="saw no data"):
        Q.convert(Q.prepare(model))


class _Residual(nn.Module):
    def __init__(self):
        super().__init__()
        self.quant, self.dequant = Q.QuantStub(), Q.DeQuantStub()
        self.a, self.b = nn.Linear(6, 6), nn.Linear(6, 6)
        self.add, self.cat, self.mul = Q.FloatFunctional(), Q.FloatFunctional(), \
            Q.FloatFunctional()

    def forward(self, x):
        x = self.quant(x)
        a, b = self.a(x), self.b(x)
        y = self.add.add_relu(a, b)
        y = self.cat.cat([y, a], axis=1)
        return self.dequant(self.mul.mul(y, y))


def test_float_functional_converts_to_integer_arithmetic():
    lz.manual_seed(2)
    model = _Residual().eval()
    x = np.random.default_rng(4).standard_normal((16, 6)).astype(np.float32)
    prepared = Q.prepare(model)
    Q.calibrate(prepared, [x])
    int8 = Q.convert(prepared)
    assert isinstance(int8.add, Q.QFunctional)
    ref, got = run(model, x), run(int8, x)
    assert np.abs(got - ref).max() < 0.03 * np.abs(ref).max()
    with pytest.raises(RuntimeError, match="add"):
        int8.add(x)


def test_sensitivity_report_and_keep_float(trained):
    model, x = trained
    prepared, int8 = ptq(model, x)
    report = Q.sensitivity_report(prepared, [x[:16]])
    names = [r["name"] for r in report.rows]
    assert names == ["module.0", "module.4", "module.8",
                     "module.10"]
    for r in report.rows:
        assert 15 < r["sqnr_db"] < 80 and 0.99 < r["cosine"] <= 1.0
        assert r["min_val"] <= r["max_val"] and r["scale"] > 0
        assert r["weight_sqnr_db"] > 20
    assert "SQNR" in str(report)
    worst = report.most_sensitive(1)
    assert worst == [min(report.rows, key=lambda r: r["sqnr_db"])["name"]]
    kept = Q.convert(Q.keep_most_sensitive(prepared, report, 1))
    layer = dict(kept.named_modules())[worst[0]]
    assert isinstance(layer, Q.FloatFallback)
    ref = run(model, x)
    err_kept = np.abs(run(kept, x) - ref).mean()
    assert err_kept < 2 * np.abs(run(int8, x) - ref).mean()
    with pytest.raises(ValueError, match="no output observer"):
        Q.keep_float(prepared, ["module.2"])
    with pytest.raises(KeyError, match="no layer"):
        Q.keep_float(prepared, ["nope"])


@pytest.mark.filterwarnings("ignore:torch.quantize_per_tensor:UserWarning")
def test_quantized_layers_match_torch_quantized_kernels():
    torch = pytest.importorskip("torch")
    nnq = torch.ao.nn.quantized
    rng = np.random.default_rng(6)
    x = rng.standard_normal((3, 4, 7, 7)).astype(np.float32)
    conv = nn.Conv2d(4, 5, 3, padding=1, stride=2)
    m = Q.QuantWrapper(conv)
    m.qconfig = Q.QConfig(Q.MinMaxObserver.with_args(quant_min=0, quant_max=127),
                          Q.default_qconfig.weight)
    prepared = Q.prepare(m)
    Q.calibrate(prepared, [x])
    int8 = Q.convert(prepared)
    qc = int8.module
    sx, zx = float(int8.quant.scale), int(int8.quant.zero_point)
    tx = torch.quantize_per_tensor(torch.tensor(x), sx, zx, torch.quint8)
    tw = torch._make_per_channel_quantized_tensor(
        torch.tensor(qc.weight), torch.tensor(qc.weight_scale.astype(np.float64)),
        torch.tensor(qc.weight_zero_point.astype(np.int64)), 0)
    tconv = nnq.Conv2d(4, 5, 3, stride=2, padding=1)
    tconv.set_weight_bias(tw, torch.tensor(qc.bias))
    tconv.scale, tconv.zero_point = float(qc.scale), int(qc.zero_point)
    with lz.no_grad():
        ours = qc(int8.quant(x)).data.astype(np.int32)
    theirs = tconv(tx).int_repr().numpy().astype(np.int32)
    np.testing.assert_array_equal(int8.quant(x).data, tx.int_repr().numpy())
    assert np.abs(ours - theirs).max() <= 1 and (ours != theirs).mean() < 0.05


def test_relu6_average_pooling_and_groups(tmp_path):
    pytest.importorskip("onnxruntime")
    lz.manual_seed(9)
    model = Q.QuantWrapper(nn.Sequential(
        nn.Conv2d(2, 4, 3, padding=1), nn.ReLU6(), nn.AvgPool2d(3, 2, 1, ceil_mode=True),
        nn.Conv2d(4, 4, 3, padding=1, groups=2), nn.ReLU(), nn.AvgPool2d(2))).eval()
    x, _ = data(8)
    x = 3 * x                                        # so that ReLU6 clips
    prepared = Q.prepare(model)
    Q.calibrate(prepared, [x])
    int8 = Q.convert(prepared)
    kinds = [type(m).__name__ for m in int8.module]
    assert kinds == ["QuantConv2d", "QuantReLU6", "QuantAvgPool2d", "QuantConv2d",
                     "QuantReLU", "QuantAvgPool2d"]
    ref, got = run(model, x), run(int8, x)
    assert np.abs(got - ref).max() < 0.05 * np.abs(ref).max()
    with lz.no_grad():
        h = int8.module[:2](int8.quant(x))
    assert h.dequantize().data.max() <= 6.0 + h.q_scale()
    with pytest.raises(lz.onnx.ExportError, match="ceil_mode"):
        Q.export_onnx(int8, x, str(tmp_path / "m.onnx"))
    int8.module[2].ceil_mode = False
    report = Q.export_onnx(int8, x, str(tmp_path / "m.onnx"))
    assert report.max_abs_diff["output_0"] <= 1.001 * float(int8.module[3].scale)
