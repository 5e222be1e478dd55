"""What each memory-relevant operator keeps for backward (issue 34): ReLU its output,
batch norm its input and per-channel statistics, dropout a bool mask, add nothing, and a
convolution no transform outside the memory budget."""
import gc
import tracemalloc

import numpy as np
import pytest

import lezero as lz
import lezero.functions as F
from lezero import nn
from lezero.core import InputRef
from lezero.runtime import budget, policy

MiB = 2 ** 20


def _var(*shape, seed=0, grad=True):
    data = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return lz.Variable(data, requires_grad=grad)


def _kept(f):
    """{attribute: array} of the arrays a Function holds besides its inputs."""
    return {k: v for k, v in vars(f).items() if isinstance(v, np.ndarray)}


def test_relu_keeps_its_output_not_its_input():
    x = _var(8, 16)
    y = F.relu(F.add(x, x))
    f = y.creator
    assert type(f.inputs[0]) is InputRef
    assert [a is y.data for a in _kept(f).values()] == [True]


def test_batch_norm_keeps_its_input_and_per_channel_statistics_only():
    x = _var(4, 6, 5, 5)
    w, b = _var(6, seed=1), _var(6, seed=2)
    y = F.batch_norm(x * 1.0, np.zeros(6, np.float32), np.ones(6, np.float32), w, b,
                     training=True)
    f = y.creator
    assert isinstance(f.inputs[0], lz.Variable)
    for name, a in _kept(f).items():
        assert a.size <= 6, f"{name} has shape {a.shape}: only per-channel arrays"


def test_dropout_keeps_a_bool_mask():
    lz.manual_seed(0)
    x = _var(32, 32)
    y = F.dropout(x * 1.0, 0.5, training=True)
    f = y.creator
    assert type(f.inputs[0]) is InputRef
    mask = f.scale
    assert mask.dtype == np.bool_ and mask.shape == (32, 32)
    y.backward(grad=np.ones((32, 32), np.float32))
    np.testing.assert_array_equal(x.grad.data, mask * np.float32(2.0))


def test_add_keeps_nothing_of_its_inputs():
    a, b = _var(4, 4), _var(4, 4, seed=1)
    y = F.add(a * 1.0, b * 1.0)
    assert all(type(x) is InputRef for x in y.creator.inputs)
    assert _kept(y.creator) == {}


@pytest.fixture
def transform_budget():
    def set_to(nbytes):
        policy.transform_cache_bytes = nbytes
    yield set_to
    policy.reset("transform_cache_bytes")


@pytest.mark.parametrize("algo", ["winograd_4x4", "im2col"])
def test_conv_keeps_no_transform_outside_the_budget(transform_budget, algo):
    transform_budget(0)
    x, w = _var(4, 8, 12, 12, grad=False), _var(8, 8, 3, 3, seed=1)
    rows = lz.memory.saved_residuals(lambda: F.sum(F.conv2d(x, w, padding=1, algo=algo)))
    assert [r.role for r in rows if r.op == "Conv"] == ["input 0"]     # w is a parameter
    assert not [r for r in rows if r.role == "cache"], rows
    assert budget.in_use() == 0


@pytest.mark.parametrize("algo", ["winograd_4x4", "im2col"])
def test_conv_keeps_its_transform_inside_the_budget_and_gives_it_back(transform_budget, algo):
    transform_budget(64 * MiB)
    x, w = _var(4, 8, 12, 12), _var(8, 8, 3, 3, seed=1)
    y = F.sum(F.conv2d(x, w, padding=1, algo=algo))
    assert budget.in_use() > 0
    y.backward()
    assert budget.in_use() == 0                 # used by backward, then given back
    gw = w.grad.data.copy()
    w.cleargrad()
    transform_budget(0)
    F.sum(F.conv2d(x, w, padding=1, algo=algo)).backward()
    np.testing.assert_allclose(w.grad.data, gw, rtol=1e-5, atol=1e-5)


def test_a_resnet_block_keeps_what_pytorch_keeps(transform_budget):
    """Per conv-bn-relu: the batch norm's input and the relu's output (PyTorch's saved
    tensors), nothing else activation-sized, measured with tracemalloc."""
    transform_budget(0)
    lz.manual_seed(0)
    from lezero.nn.models.resnet import BasicBlock
    block = BasicBlock(16, 16)
    x = _var(8, 16, 16, 16, grad=False)
    act = x.data.nbytes
    F.sum(block(x)).backward()                          # warm: kernels, scratch buffers
    for p in block.parameters():
        p.cleargrad()
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        y = F.sum(block(x))
        kept = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    # bn1 input, relu1 output, bn2 input, the final relu output: four activations, and
    # the graph's Python objects (before issue 34: nine, and the Winograd transforms)
    assert kept < 4.8 * act, f"kept {kept / act:.2f} activations"
    del y


def test_mul_keeps_only_the_factor_backward_reads():
    x = _var(8, 16)
    mask = np.random.default_rng(3).random((8, 16)).astype(np.float32)
    y = F.mul(F.add(x, x), mask)                 # activation * constant: keeps the constant
    f = y.creator
    assert type(f.inputs[0]) is InputRef and f.inputs[1].data is mask
    y.backward(grad=np.ones((8, 16), np.float32))
    np.testing.assert_allclose(x.grad.data, 2 * mask)
    w = _var(16, seed=4)
    z = F.mul(F.add(x, x), w)                    # both need a gradient: both kept
    assert all(isinstance(v, lz.Variable) for v in z.creator.inputs)


def test_attention_softmax_keeps_its_output_and_dropout_a_bool_mask():
    lz.manual_seed(0)
    q, k, v = (_var(2, 3, 8, 4, seed=s) for s in (5, 6, 7))
    out = F.scaled_dot_product_attention(q * 1.0, k * 1.0, v * 1.0, dropout_p=0.25,
                                         attn_mask=np.ones((8, 8), bool), chunk_size=0)
    kinds = {}
    stack, seen = [out.creator], set()
    while stack:
        f = stack.pop()
        if f is None or id(f) in seen:
            continue
        seen.add(id(f))
        kinds[type(f).__name__] = f
        stack.extend(x.creator for x in f.inputs)
    soft, drop = kinds["MaskedSoftmax"], kinds["ScaleShift"]
    assert type(soft.inputs[0]) is InputRef                     # the scores are gone
    assert drop.scale.dtype == np.bool_ and drop.scale.shape == (2, 3, 8, 8)


def test_cross_entropy_keeps_its_exponentials_not_the_logits():
    x = _var(6, 40)
    loss = F.cross_entropy(F.add(x, x), np.arange(6) % 40)
    f = loss.creator
    assert type(f.inputs[0]) is InputRef
    assert sorted(_kept(f)) == ["exp", "inv_sum"]
    loss.backward()
    p = np.exp(2 * x.data - (2 * x.data).max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    p[np.arange(6), np.arange(6) % 40] -= 1
    np.testing.assert_allclose(x.grad.data, 2 * p / 6, rtol=1e-5, atol=1e-7)
