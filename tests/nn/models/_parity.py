"""Parity with torchvision: the reference built in the test, its ``state_dict`` loaded as
it is (``strict=True``), then outputs and gradients compared.

The references get non-trivial weights first (``randomize_``): batch-norm statistics and
affine parameters away from 0/1 and every constant-initialised tensor (zero heads, zero
class tokens, ConvNeXt's 1e-6 layer scales) perturbed, so a parameter the LeZero model
ignored or misplaced would change the outputs.
"""
import numpy as np
import torch

import lezero as lz
from lezero.testing.oracles import import_torchvision

tnn = torch.nn


def tv_models():
    """``torchvision.models`` (through the oracle helper)."""
    return import_torchvision().models


def state_to_numpy(module):
    return {k: v.detach().numpy().copy() for k, v in module.state_dict().items()}


def randomize_(module, seed=0):
    """Give every norm layer non-trivial statistics and affine parameters, and perturb
    every parameter that is constant (zeros, ones, 1e-6), in place; returns ``module``."""
    g = torch.Generator().manual_seed(seed)
    norms = (tnn.BatchNorm2d, tnn.LayerNorm)
    with torch.no_grad():
        for m in module.modules():
            if isinstance(m, tnn.BatchNorm2d):
                m.running_mean.copy_(0.1 * torch.randn(m.running_mean.shape, generator=g))
                m.running_var.copy_(1 + 0.5 * torch.rand(m.running_var.shape, generator=g))
            if isinstance(m, norms) and m.weight is not None:
                m.weight.copy_(1 + 0.2 * torch.randn(m.weight.shape, generator=g))
                m.bias.copy_(0.1 * torch.randn(m.bias.shape, generator=g))
        for p in module.parameters():
            if p.numel() == 1 or float(p.std()) == 0.0:
                p.add_(0.05 * torch.randn(p.shape, generator=g))
    return module


def assert_same_layout(ref, ours):
    """The same keys in the same order, with the same shapes."""
    ref_sd, our_sd = ref.state_dict(), ours.state_dict()
    assert list(our_sd) == list(ref_sd)
    for key, value in ref_sd.items():
        assert tuple(our_sd[key].shape) == tuple(value.shape), key


def load_reference(ref, ours):
    """Load the reference's state_dict into ``ours`` strictly; returns ``ours``."""
    result = ours.load_state_dict(state_to_numpy(ref), strict=True)
    assert not result.missing_keys and not result.unexpected_keys
    return ours


def images(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def assert_close(ours, ref, rtol, what=""):
    """|ours - ref| <= rtol * (|ref| + max |ref|): relative to the array's scale."""
    scale = float(np.abs(ref).max()) or 1.0
    np.testing.assert_allclose(ours, ref, rtol=rtol, atol=rtol * scale, err_msg=what)


def assert_forward_equal(ref, ours, x, train=False, rtol=1e-4):
    """Outputs equal in eval mode (or train mode: batch statistics, no dropout), and in
    train mode the updated running statistics too.  Returns the reference output."""
    ref.train(train)
    ours.train(train)
    with torch.no_grad():
        expected = ref(torch.from_numpy(x)).numpy()
    with lz.no_grad():
        got = ours(x).data
    assert got.shape == expected.shape
    assert_close(got, expected, rtol, f"{'train' if train else 'eval'}-mode output")
    if train:
        ref_sd, our_sd = ref.state_dict(), ours.state_dict()
        for key in ref_sd:
            if key.endswith("running_mean") or key.endswith("running_var"):
                assert_close(our_sd[key], ref_sd[key].numpy(), rtol, key)
    return expected


def assert_grad_equal(ref, ours, x, name, train=True, rtol=1e-3, dtype=np.float32):
    """The gradient of parameter ``name`` of a fixed weighted sum of the outputs, both
    models in ``dtype`` (float64 moves them there for good)."""
    if dtype == np.float64:
        ref.double()
        ours.double()
    x = x.astype(dtype)
    ref.train(train)
    ours.train(train)
    ref.zero_grad()
    out = ref(torch.from_numpy(x))
    weights = np.random.default_rng(1).standard_normal(tuple(out.shape)).astype(dtype)
    (out * torch.from_numpy(weights)).sum().backward()
    expected = dict(ref.named_parameters())[name].grad.numpy()
    ours.zero_grad()
    (ours(x) * weights).sum().backward()
    got = dict(ours.named_parameters())[name].grad
    assert got is not None, f"{name} got no gradient"
    assert float(np.abs(expected).max()) > 0, f"{name}: the reference gradient is zero"
    assert_close(got.data, expected, rtol, f"gradient of {name}")


def check_pair(ref, ours, x, grad_param, train_x=None, rtol=1e-4, grad_rtol=1e-3,
               grad_train=True, grad_dtype=np.float32):
    """The whole parity check of one small configuration: layout, strict load, eval and
    train-mode forward, one parameter's gradient (in train mode unless ``grad_train`` is
    False: through many batch-statistics norms of a tiny batch a float32 gradient can be
    ill-conditioned, PyTorch's as much as LeZero's, against float64), in ``grad_dtype``."""
    randomize_(ref)
    assert_same_layout(ref, ours)
    load_reference(ref, ours)
    assert_forward_equal(ref, ours, x, train=False, rtol=rtol)
    x_train = x if train_x is None else train_x
    assert_forward_equal(ref, ours, x_train, train=True, rtol=rtol)
    load_reference(ref, ours)           # the train-mode pass moved the running statistics
    assert_grad_equal(ref, ours, x_train, grad_param, train=grad_train, rtol=grad_rtol,
                      dtype=grad_dtype)


def check_default(name, params=None, shape=(1, 3, 32, 32)):
    """torchvision's builder ``name`` in its default configuration against LeZero's:
    layout, the parameter count (``params``, torchvision's published figure), a strict
    load of the randomised reference and, unless ``shape`` is None, equal eval outputs."""
    from lezero.nn import models
    ref, ours = getattr(tv_models(), name)(), models.get_model(name)
    assert_same_layout(ref, ours)
    if params is not None:
        assert ours.num_parameters() == sum(p.numel() for p in ref.parameters()) == params
    if shape is not None:
        load_reference(randomize_(ref), ours)
        assert_forward_equal(ref, ours, images(shape))
    return ref, ours
