"""Fusion: the folded layers compute what conv/linear + batch norm (+ ReLU) compute in
eval mode; runs are found in Sequentials, named explicitly, or given as modules."""
import numpy as np
import pytest

import lezero as lz
from lezero import nn
from lezero import quantization as Q

RNG = np.random.default_rng(3)


def _trained_bn(bn):
    """Give a batch norm non-trivial statistics and affine parameters."""
    n = bn.num_features
    bn.running_mean[...] = RNG.standard_normal(n)
    bn.running_var[...] = RNG.uniform(0.3, 2.0, n)
    bn.weight.data[...] = RNG.uniform(0.5, 1.5, n)
    bn.bias.data[...] = RNG.standard_normal(n)
    return bn


def _out(m, x):
    with lz.no_grad():
        return m.eval()(x).data


@pytest.mark.parametrize("bias", [True, False])
def test_conv_bn_and_conv_bn_relu_fold_exactly(bias):
    conv = nn.Conv2d(3, 5, 3, padding=1, bias=bias)
    bn = _trained_bn(nn.BatchNorm2d(5))
    x = RNG.standard_normal((2, 3, 6, 6)).astype(np.float32)
    ref = _out(nn.Sequential(conv, bn), x)
    folded = Q.fuse([conv, bn])
    assert type(folded) is nn.Conv2d and folded.bias is not None
    np.testing.assert_allclose(_out(folded, x), ref, rtol=1e-5, atol=1e-5)
    fused = Q.fuse([conv, bn, nn.ReLU()])
    assert isinstance(fused, Q.ConvReLU2d)
    np.testing.assert_allclose(_out(fused, x), np.maximum(ref, 0), rtol=1e-5, atol=1e-5)
    w, b = Q.fold_bn(conv.weight.data, None if conv.bias is None else conv.bias.data, bn)
    np.testing.assert_array_equal(folded.weight.data, w)
    np.testing.assert_array_equal(folded.bias.data, b)


def test_linear_runs():
    lin, bn = nn.Linear(4, 6), _trained_bn(nn.BatchNorm1d(6))
    x = RNG.standard_normal((5, 4)).astype(np.float32)
    ref = _out(nn.Sequential(lin, bn), x)
    np.testing.assert_allclose(_out(Q.fuse([lin, bn]), x), ref, rtol=1e-5, atol=1e-5)
    fused = Q.fuse([lin, bn, nn.ReLU()])
    assert isinstance(fused, Q.LinearReLU)
    np.testing.assert_allclose(_out(fused, x), np.maximum(ref, 0), rtol=1e-5, atol=1e-5)
    lr = Q.fuse([lin, nn.ReLU()])
    np.testing.assert_allclose(_out(lr, x), np.maximum(_out(lin, x), 0), rtol=1e-6)


def test_fuse_model_finds_runs_and_keeps_the_original():
    model = nn.Sequential(nn.Conv2d(1, 4, 3), _trained_bn(nn.BatchNorm2d(4)), nn.ReLU(),
                          nn.Conv2d(4, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(16, 8),
                          nn.ReLU(), nn.Linear(8, 3))
    x = RNG.standard_normal((2, 1, 6, 6)).astype(np.float32)
    ref = _out(model, x)
    fused = Q.fuse(model)
    kinds = [type(m).__name__ for m in fused]
    assert kinds == ["ConvReLU2d", "Identity", "Identity", "ConvReLU2d", "Identity",
                     "Flatten", "LinearReLU", "Identity", "Linear"]
    assert type(model[1]) is nn.BatchNorm2d                   # a copy by default
    np.testing.assert_allclose(_out(fused, x), ref, rtol=1e-5, atol=1e-5)
    same = Q.fuse(model, inplace=True)
    assert same is model and type(model[1]) is nn.Identity


def test_named_groups_and_declared_groups():
    class Block(nn.Module):
        fusion_groups = [["conv", "bn", "act"]]

        def __init__(self):
            super().__init__()
            self.conv, self.bn, self.act = nn.Conv2d(2, 2, 1), _trained_bn(nn.BatchNorm2d(2)), \
                nn.ReLU()

        def forward(self, x):
            return self.act(self.bn(self.conv(x)))

    x = RNG.standard_normal((1, 2, 3, 3)).astype(np.float32)
    block = Block()
    ref = _out(block, x)
    for fused in (Q.fuse(block), Q.fuse(block, [["conv", "bn", "act"]])):
        assert isinstance(fused.conv, Q.ConvReLU2d) and isinstance(fused.bn, nn.Identity)
        np.testing.assert_allclose(_out(fused, x), ref, rtol=1e-5, atol=1e-6)
    qat = Q.fuse(block, qat=True)
    assert isinstance(qat.conv, Q.ConvBnReLU2d)
    np.testing.assert_allclose(_out(qat, x), ref, rtol=1e-6, atol=1e-6)


def test_fuse_errors():
    with pytest.raises(ValueError, match="cannot fuse"):
        Q.fuse([nn.ReLU(), nn.Linear(2, 2)])
    with pytest.raises(ValueError, match="does not match"):
        Q.fuse([nn.Conv2d(1, 3, 1), nn.BatchNorm2d(4)])
    with pytest.raises(KeyError, match="no submodule"):
        Q.fuse(nn.Sequential(nn.Linear(2, 2)), [["0", "7"]])
    with pytest.raises(TypeError, match="Module"):
        Q.fuse("model")
