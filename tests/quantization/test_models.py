"""Zoo models made quantizable keep their weights and keys, and quantize end to end."""
import numpy as np
import pytest

import lezero as lz
from lezero import nn
from lezero.nn import inference_fusion
from lezero import quantization as Q
from lezero.quantization.models import QuantizableBasicBlock, quantizable_resnet

from tests.quantization._models import run


def test_quantizable_resnet18():
    lz.manual_seed(7)
    model = nn.models.get_model("resnet18", num_classes=5, small_input=True,
                                base_width=8).eval()
    x = np.random.default_rng(9).standard_normal((4, 3, 16, 16)).astype(np.float32)
    with inference_fusion.disabled():   # the quantizable copy runs unfused: compare alike
        keys, ref = list(model.state_dict()), run(model, x)
    qmodel = quantizable_resnet(model)
    assert list(qmodel.state_dict()) == keys
    assert isinstance(qmodel.layer1[0], QuantizableBasicBlock)
    np.testing.assert_array_equal(run(qmodel, x), ref)
    fused = Q.fuse(qmodel)
    assert isinstance(fused.layer2[0].conv1, Q.ConvReLU2d)
    assert isinstance(fused.layer2[0].downsample[0], nn.Conv2d)     # conv+bn folded
    np.testing.assert_allclose(run(fused, x), ref, rtol=1e-4, atol=1e-4)
    prepared = Q.prepare(fused)
    Q.calibrate(prepared, [x])
    int8 = Q.convert(prepared)
    assert isinstance(int8.layer1[0].skip_add, Q.QFunctional)
    got = run(int8, x)
    assert np.abs(got - ref).max() < 0.1 * np.abs(ref).max()
    with pytest.raises(TypeError, match="ResNet"):
        quantizable_resnet(nn.Linear(2, 2))


def test_lenet_quantizes_through_a_wrapper():
    lz.manual_seed(8)
    lenet = nn.models.LeNet5(10, 1, 8)
    x = np.random.default_rng(10).random((6, 1, 8, 8), dtype=np.float32)
    wrapped = Q.QuantWrapper(lenet).eval()
    prepared = Q.prepare(Q.fuse(wrapped))
    Q.calibrate(prepared, [x])
    int8 = Q.convert(prepared)
    ref = run(lenet.eval(), x)
    # F.flatten inside LeNet5.forward is a view: it keeps the quantization parameters
    assert np.abs(run(int8, x) - ref).max() < 0.05 * np.abs(ref).max()
    # 21k weights, 236 channels with a float32 bias and scale each (the symmetric weight
    # zero points are not saved): 0.2699x
    assert Q.model_size(int8) <= 0.27 * Q.model_size(lenet)
