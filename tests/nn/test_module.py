"""nn.Module semantics: registration, traversal, state_dict, modes, hooks, repr, init."""
import numpy as np
import pytest
import torch

import lezero as lz
from lezero import nn


class Affine(nn.Module):
    def __init__(self, n_in, n_out, bias=True):
        super().__init__()
        self.weight = nn.Parameter(np.ones((n_out, n_in), np.float32))
        if bias:
            self.bias = nn.Parameter(np.zeros(n_out, np.float32))
        else:
            self.register_parameter("bias", None)
        self.register_buffer("calls", np.zeros((), np.int64))

    def forward(self, x):
        self.calls[...] += 1
        y = x @ self.weight.T
        return y if self.bias is None else y + self.bias


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.first = Affine(3, 4)
        self.blocks = nn.ModuleList([Affine(4, 4), Affine(4, 4, bias=False)])
        self.head = nn.Sequential(Affine(4, 2))
        self.scale = nn.Parameter(np.ones(1, np.float32))

    def forward(self, x):
        x = self.first(x)
        for b in self.blocks:
            x = b(x)
        return self.head(x) * self.scale


def test_registration_order_and_names():
    net = Net()
    # PyTorch's order: a module's own parameters, then its children in assignment order.
    assert [n for n, _ in net.named_parameters()] == [
        "scale", "first.weight", "first.bias", "blocks.0.weight", "blocks.0.bias",
        "blocks.1.weight", "head.0.weight", "head.0.bias"]
    assert [n for n, _ in net.named_children()] == ["first", "blocks", "head"]
    assert len(list(net.modules())) == 7
    assert [n for n, _ in net.named_buffers()] == ["first.calls", "blocks.0.calls",
                                                   "blocks.1.calls", "head.0.calls"]


def test_state_dict_keys_match_torch_for_the_same_structure():
    class TNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.first = torch.nn.Linear(3, 4)
            self.blocks = torch.nn.ModuleList([torch.nn.Linear(4, 4),
                                               torch.nn.Linear(4, 4, bias=False)])
            self.head = torch.nn.Sequential(torch.nn.Linear(4, 2))
            self.scale = torch.nn.Parameter(torch.ones(1))

    ours = [k for k in Net().state_dict() if not k.endswith("calls")]
    assert ours == list(TNet().state_dict().keys())


def test_shared_parameters_counted_once():
    net = nn.Module()
    a = Affine(2, 2)
    net.a = a
    net.b = a
    assert len(list(net.parameters())) == 2
    assert net.num_parameters() == 6


def test_load_state_dict_strict_missing_unexpected_and_shape_errors():
    src, dst = Net(), Net()
    for p in src.parameters():
        p.data[...] = np.random.default_rng(0).standard_normal(p.shape)
    result = dst.load_state_dict(src.state_dict())
    assert result.missing_keys == [] and result.unexpected_keys == []
    for (k, a), b in zip(src.state_dict().items(), dst.state_dict().values()):
        np.testing.assert_array_equal(a, b, err_msg=k)
    sd = src.state_dict()
    sd.pop("scale")
    sd["extra.weight"] = np.ones(1)
    with pytest.raises(KeyError, match="scale.*extra.weight"):
        dst.load_state_dict(sd)
    res = dst.load_state_dict(sd, strict=False)
    assert res.missing_keys == ["scale"] and res.unexpected_keys == ["extra.weight"]
    bad = src.state_dict()
    bad["first.weight"] = np.ones((5, 3))
    with pytest.raises(ValueError, match=r"first.weight.*\(5, 3\).*\(4, 3\)"):
        dst.load_state_dict(bad)


def test_load_state_dict_casts_and_copies():
    net = Affine(2, 2)
    w = np.arange(4, dtype=np.float64).reshape(2, 2)
    net.load_state_dict({"weight": w, "bias": np.zeros(2), "calls": np.array(3)})
    assert net.weight.dtype == np.float32
    w[0, 0] = 99
    assert net.weight.data[0, 0] == 0
    assert net.calls == 3


def test_train_eval_zero_grad_apply():
    net = Net()
    assert net.training and net.head[0].training
    net.eval()
    assert not net.training and not net.blocks[1].training
    net.train()
    y = net(lz.Variable(np.ones((2, 3), np.float32))).sum()
    y.backward()
    assert all(p.grad is not None for p in net.parameters())
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())
    visited = []
    net.apply(lambda m: visited.append(type(m).__name__))
    assert visited[-1] == "Net" and visited.count("Affine") == 4


def test_forward_hooks_and_pre_hooks():
    layer = Affine(2, 2)
    seen = []
    h1 = layer.register_forward_pre_hook(lambda m, args: (args[0] * 2,))
    h2 = layer.register_forward_hook(lambda m, args, out: seen.append(out.shape) or out + 1)
    out = layer(lz.Variable(np.ones((1, 2), np.float32)))
    np.testing.assert_array_equal(out.data, [[5, 5]])
    assert seen == [(1, 2)]
    h1.remove()
    h2.remove()
    np.testing.assert_array_equal(layer(lz.Variable(np.ones((1, 2), np.float32))).data, [[2, 2]])


def test_bad_assignments_are_rejected():
    layer = Affine(2, 2)
    with pytest.raises(TypeError, match="parameter 'weight'"):
        layer.weight = np.ones((2, 2))
    with pytest.raises(TypeError, match="buffer 'calls'"):
        layer.calls = 3
    with pytest.raises(TypeError, match="register_buffer"):
        layer.register_buffer("x", [1, 2])

    class Forgot(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(np.ones(1))

    with pytest.raises(AttributeError, match="super"):
        Forgot()


def test_repr_prints_tree_with_counts():
    text = repr(Net())
    assert text.startswith("Net(") and "(blocks): ModuleList(" in text and "params" in text


def test_sequential_indexing_and_containers():
    seq = nn.Sequential(Affine(2, 3), Affine(3, 1))
    assert len(seq) == 2 and isinstance(seq[-1], Affine) and len(seq[:1]) == 1
    with pytest.raises(IndexError, match="Sequential"):
        seq[5]
    d = nn.ModuleDict({"a": Affine(1, 1)})
    assert "a" in d and list(d.keys()) == ["a"]
    pl = nn.ParameterList([nn.Parameter(np.ones(2))])
    assert [n for n, _ in pl.named_parameters()] == ["0"]


def test_init_functions_follow_torch_statistics():
    lz.manual_seed(0)
    w = nn.Parameter(np.zeros((256, 128), np.float32))
    nn.init.kaiming_uniform_(w, a=np.sqrt(5))
    bound = np.sqrt(6 / ((1 + 5) * 128))
    assert np.abs(w.data).max() <= bound and np.abs(w.data).max() > 0.95 * bound
    nn.init.xavier_normal_(w)
    assert w.data.std() == pytest.approx(np.sqrt(2 / (256 + 128)), rel=0.05)
    nn.init.orthogonal_(w)
    np.testing.assert_allclose(w.data.T @ w.data, np.eye(128), atol=1e-4)
    nn.init.trunc_normal_(w, std=1.0, a=-0.5, b=0.5)
    assert np.abs(w.data).max() <= 0.5
    assert nn.init.calculate_gain("leaky_relu", 0.2) == pytest.approx(np.sqrt(2 / 1.04))
    with pytest.raises(ValueError, match="nonlinearity"):
        nn.init.calculate_gain("swish")
    lz.manual_seed(7)
    a = nn.init.normal_(np.zeros(4))
    lz.manual_seed(7)
    np.testing.assert_array_equal(a, nn.init.normal_(np.zeros(4)))
