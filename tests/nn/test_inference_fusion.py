"""Inference fusion (lezero.nn.inference_fusion): conv + batch norm (+ ReLU/ReLU6) folded
under eval() and no_grad gives the unfused outputs (float32, 1e-5), the folded weights
are cached and refolded when a parameter changes, and training is untouched."""
import numpy as np
import pytest

import lezero as lz
from lezero import nn, optim
from lezero.core.hooks import FunctionHook
from lezero.nn import inference_fusion as fusion
from lezero.nn.models import mobilenet_v2, resnet18, resnet50


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def randomize_bn_(model, seed=0):
    """Batch norms with non-trivial statistics and affine parameters."""
    rng = np.random.default_rng(seed)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            c = m.num_features
            m.running_mean[...] = 0.1 * rng.standard_normal(c)
            m.running_var[...] = 1 + 0.5 * rng.random(c)
            m.weight.data[...] = 1 + 0.2 * rng.standard_normal(c)
            m.bias.data[...] = 0.1 * rng.standard_normal(c)
    return model


def assert_close(got, want, rtol=1e-5):
    scale = float(np.abs(want).max()) or 1.0
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * scale)


def outputs(model, x):
    """(fused, unfused) eval outputs."""
    model.eval()
    with lz.no_grad():
        fused = model(x).data.copy()
        with fusion.disabled():
            plain = model(x).data.copy()
    return fused, plain


@pytest.mark.parametrize("build, shape", [
    (lambda: resnet18(num_classes=10), (2, 3, 64, 64)),
    (lambda: resnet50(num_classes=10, base_width=16), (1, 3, 64, 64)),
    (lambda: mobilenet_v2(num_classes=10, width_mult=0.5), (2, 3, 64, 64)),
])
def test_zoo_models_fused_equal_unfused(build, shape):
    model = randomize_bn_(build())
    fused, plain = outputs(model, rand(*shape))
    assert_close(fused, plain)
    assert plain.std() > 0


def test_fusion_actually_folds_the_batch_norms():
    """Every batch norm of ResNet-18 is folded once, and the fold is cached."""
    model = randomize_bn_(resnet18(num_classes=10)).eval()
    x = rand(1, 3, 32, 32)
    folds = []
    original = fusion.fold_batch_norm
    fusion.fold_batch_norm = lambda *a: folds.append(1) or original(*a)
    try:
        fusion.clear()
        with lz.no_grad():
            model(x)
            model(x)                      # cached: no second fold
    finally:
        fusion.fold_batch_norm = original
    n_bn = sum(isinstance(m, nn.BatchNorm2d) for m in model.modules())
    assert len(folds) == n_bn == 20


def test_sequential_conv_bn_relu6_and_hooks():
    seq = randomize_bn_(nn.Sequential(nn.Conv2d(4, 8, 3, padding=1), nn.BatchNorm2d(8),
                                      nn.ReLU6(), nn.Sequential(nn.Conv2d(8, 8, 1, bias=False),
                                                                nn.BatchNorm2d(8), nn.ReLU()),
                                      nn.Conv2d(8, 2, 1)))
    seq.eval()
    x = rand(2, 4, 9, 9) * 4
    with lz.no_grad():
        fused = fusion.sequential(seq, x).data
        plain = seq(x).data
        assert_close(fused, plain)
        seen = []
        handle = seq[1].register_forward_hook(lambda m, a, out: seen.append(out.shape))
        fusion.sequential(seq, x)         # a hooked batch norm runs as a module
        handle.remove()
    assert seen == [(2, 8, 9, 9)]


def test_cache_refolds_after_parameters_change():
    conv, bn = nn.Conv2d(3, 4, 3), randomize_bn_(nn.BatchNorm2d(4))
    conv.eval(), bn.eval()
    x = rand(1, 3, 8, 8)

    def both():
        with lz.no_grad():
            return fusion.conv_bn(conv, bn, x).data.copy(), bn(conv(x)).data.copy()
    assert_close(*both())
    conv.weight.data *= 2                 # in place: the sampled values change
    assert_close(*both())
    bn.running_var[...] = 4.0
    assert_close(*both())
    bn.load_state_dict({k: v * 0.5 for k, v in bn.state_dict().items()})
    assert_close(*both())
    fusion.clear(nn.Sequential(conv, bn))
    assert conv not in fusion._CACHE


def test_training_after_eval_is_unaffected():
    """eval + no_grad inference (fused), then train(): the batch norms use batch
    statistics, update their running statistics, and a step gives the same parameters as
    a model that never ran fused."""
    a = randomize_bn_(resnet18(num_classes=4, base_width=8))
    b = randomize_bn_(resnet18(num_classes=4, base_width=8))
    b.load_state_dict(a.state_dict())
    x, t = rand(4, 3, 32, 32), np.array([0, 1, 2, 3])
    a.eval()
    with lz.no_grad():
        a(x)
    for model in (a, b):
        model.train()
        opt = optim.SGD(model.parameters(), lr=0.1)
        loss = lz.functions.cross_entropy(model(x), t)
        model.zero_grad()
        loss.backward()
        opt.step()
    for (k, va), vb in zip(a.state_dict().items(), b.state_dict().values()):
        np.testing.assert_array_equal(va, vb, err_msg=k)
    fused, plain = outputs(a, x)          # and inference refolds the new weights
    assert_close(fused, plain)


def test_not_fused_when_grad_is_recorded():
    conv, bn = nn.Conv2d(2, 3, 1), nn.BatchNorm2d(3)
    conv.eval(), bn.eval()
    x = lz.Variable(rand(1, 2, 4, 4))
    y = fusion.conv_bn(conv, bn, x, nn.ReLU())
    y.sum().backward()
    assert conv.weight.grad is not None and bn.weight.grad is not None
    assert fusion.is_active(conv) is False


def test_other_activations_are_called_as_modules():
    conv, bn = nn.Conv2d(3, 4, 3, padding=1), randomize_bn_(nn.BatchNorm2d(4))
    conv.eval(), bn.eval()
    x = rand(2, 3, 6, 6)
    with lz.no_grad():
        got = fusion.conv_bn(conv, bn, x, nn.SiLU()).data
        want = nn.SiLU()(bn(conv(x))).data
    assert_close(got, want)


class FusingSequential(nn.Sequential):
    """What Sequential.forward computes through ``run_children`` (its proposed wiring)."""

    def forward(self, x):
        return fusion.run_children(self, x)


def test_run_children_as_a_sequential_forward():
    layers = [nn.Conv2d(3, 6, 3), nn.BatchNorm2d(6), nn.ReLU(), nn.Conv2d(6, 2, 1)]
    fusing, plain = FusingSequential(*layers), nn.Sequential(*layers)
    randomize_bn_(plain)
    x = rand(2, 3, 7, 7)
    fusion.clear()
    np.testing.assert_array_equal(fusing(x).data, plain(x).data)      # training: unfused
    assert layers[0] not in fusion._CACHE
    plain.eval()
    with lz.no_grad():
        assert_close(fusing(x).data, plain(x).data)
    assert layers[0] in fusion._CACHE


class _SeenFunctions(FunctionHook):
    def __init__(self):
        self.names = []

    def forward_preprocess(self, function, in_data):
        self.names.append(type(function).__name__)


def _conv_bn_relu(seed=0, bias=True, stride=1, groups=1):
    conv = nn.Conv2d(4, 8, 3, stride=stride, padding=1, groups=groups, bias=bias)
    bn, act = randomize_bn_(nn.BatchNorm2d(8), seed), nn.ReLU6()
    for m in (conv, bn, act):
        m.eval()
    return conv, bn, act


@pytest.mark.parametrize("stride, groups", [(1, 1), (2, 1), (1, 4)])
def test_direct_product_is_the_operators_product(stride, groups):
    """Without function hooks the fused convolution runs its product without a Function
    (inference_fusion._convolve); with one (a profiler, autocast, jit's tracer) it calls
    F.conv2d, which the hook sees.  Both give the same numbers, bit for bit."""
    conv, bn, act = _conv_bn_relu(stride=stride, groups=groups)
    x = rand(2, 4, 9, 9) * 3
    seen = _SeenFunctions()
    with lz.no_grad():
        direct = fusion.conv_bn(conv, bn, x, act)
        with lz.using_config("function_hooks", (seen,)):
            hooked = fusion.conv_bn(conv, bn, x, act)
    assert seen.names == ["Conv"]
    np.testing.assert_array_equal(direct.data, hooked.data)
    assert direct.creator is None and not direct.requires_grad
    with fusion.disabled(), lz.no_grad():
        assert_close(direct.data, act(bn(conv(x))).data)


def test_direct_product_leaves_other_inputs_to_the_operator():
    """A Variable input and a float64 model give the unfused numbers; an input of another
    dtype than the weights gets the operator's error."""
    conv, bn, act = _conv_bn_relu(bias=False)
    with lz.no_grad():
        with pytest.raises(TypeError, match="conv2d: x dtype float16 and weight dtype"):
            fusion.conv_bn(conv, bn, rand(2, 4, 7, 7).astype(np.float16), act)
        v = lz.Variable(rand(2, 4, 7, 7))
        assert_close(fusion.conv_bn(conv, bn, v, act).data, act(bn(conv(v))).data)
    for m in (conv, bn):
        m.double()
    x64 = rand(2, 4, 7, 7).astype(np.float64)
    with lz.no_grad():
        got = fusion.conv_bn(conv, bn, x64, act).data
        with fusion.disabled():
            want = act(bn(conv(x64))).data
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_cache_refolds_after_batch_norm_affine_changes_in_place():
    conv, bn, act = _conv_bn_relu(bias=False)
    x = rand(1, 4, 6, 6)

    def both():
        with lz.no_grad():
            fused = fusion.conv_bn(conv, bn, x, act).data.copy()
            with fusion.disabled():
                return fused, act(bn(conv(x))).data.copy()
    assert_close(*both())
    bn.bias.data += 0.5
    assert_close(*both())
    bn.weight.data *= -1
    assert_close(*both())
