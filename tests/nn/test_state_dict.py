"""state_dict, load_state_dict and named_* against torch.nn on the same structures.

Each case builds one module tree twice, in LeZero and in PyTorch, and compares key lists,
order and behaviour: prefixes, keep_vars, persistent and non-persistent buffers, shared
modules and parameters, nested containers, strict and non-strict loading.
"""
from collections import OrderedDict

import numpy as np
import pytest
import torch

import lezero as lz
from lezero import nn


def _pair(lib):
    """The same tree in ``lib`` (lezero.nn or torch.nn): containers, a shared module,
    a tied parameter, persistent and non-persistent buffers, a None bias."""
    tensor = (lambda a: torch.tensor(a)) if lib is torch.nn else (lambda a: np.asarray(a))

    class Block(lib.Module):
        def __init__(self):
            super().__init__()
            self.lin = lib.Linear(3, 3)
            self.norm = lib.BatchNorm1d(3)
            self.register_buffer("steps", tensor(np.zeros(2, np.float32)))
            self.register_buffer("cache", tensor(np.ones(2, np.float32)), persistent=False)

    class Tree(lib.Module):
        def __init__(self):
            super().__init__()
            shared = Block()
            self.seq = lib.Sequential(shared, lib.ReLU(), shared)
            self.blocks = lib.ModuleList([Block(), lib.Linear(3, 2, bias=False)])
            self.heads = lib.ModuleDict({"b": lib.Linear(2, 1), "a": lib.Linear(2, 1)})
            self.tied = lib.Linear(3, 3)
            self.tied.weight = self.blocks[0].lin.weight
            self.scale = lib.Parameter(tensor(np.ones(1, np.float32)))

    return Tree()


@pytest.fixture
def trees():
    return _pair(nn), _pair(torch.nn)


@pytest.mark.parametrize("prefix", ["", "model.", "model", "a.b."])
def test_state_dict_keys_and_order_equal_torch(trees, prefix):
    ours, theirs = trees
    assert list(ours.state_dict(prefix=prefix)) == list(theirs.state_dict(prefix=prefix))


def test_non_persistent_buffers_stay_out_of_state_dict_but_are_buffers(trees):
    ours, theirs = trees
    assert not any(k.endswith("cache") for k in ours.state_dict())
    assert [n for n, _ in ours.named_buffers()] == [n for n, _ in theirs.named_buffers()]
    assert any(n.endswith("cache") for n, _ in ours.named_buffers())


def test_keep_vars_returns_the_parameters_themselves(trees):
    ours, _ = trees
    kept = ours.state_dict(keep_vars=True)
    assert kept["scale"] is ours.scale
    assert kept["tied.weight"] is ours.blocks[0].lin.weight
    plain = ours.state_dict()
    assert isinstance(plain["scale"], np.ndarray)
    assert isinstance(plain["seq.0.steps"], np.ndarray)


@pytest.mark.parametrize("method", ["named_parameters", "named_buffers", "named_modules"])
@pytest.mark.parametrize("prefix", ["", "net"])
def test_named_members_with_prefix_equal_torch(trees, method, prefix):
    ours, theirs = trees
    names = lambda m: [n for n, _ in getattr(m, method)(prefix=prefix)]
    assert names(ours) == names(theirs)


def test_named_parameters_without_recursion(trees):
    ours, theirs = trees
    assert [n for n, _ in ours.named_parameters(recurse=False)] == \
        [n for n, _ in theirs.named_parameters(recurse=False)]
    assert [n for n, _ in ours.named_children()] == [n for n, _ in theirs.named_children()]


def _torch_state_as_numpy(module):
    return OrderedDict((k, v.detach().numpy().copy()) for k, v in module.state_dict().items())


def test_load_torch_state_dict_round_trip(trees):
    ours, theirs = trees
    with torch.no_grad():
        for p in theirs.parameters():
            p.normal_()
    theirs.seq[0].steps += 3
    result = ours.load_state_dict(_torch_state_as_numpy(theirs))
    assert result.missing_keys == [] and result.unexpected_keys == []
    for key, value in ours.state_dict().items():
        np.testing.assert_array_equal(value, theirs.state_dict()[key].numpy(), err_msg=key)
    # The tie survives loading: one Parameter, so one value.
    assert ours.tied.weight is ours.blocks[0].lin.weight


def test_missing_and_unexpected_keys_equal_torch(trees):
    ours, theirs = trees
    sd = _torch_state_as_numpy(theirs)
    del sd["scale"], sd["heads.a.bias"]
    sd["extra.weight"] = np.ones(1, np.float32)
    sd["seq.0.cache"] = np.ones(2, np.float32)      # a non-persistent buffer is unexpected
    torch_sd = OrderedDict((k, torch.tensor(v)) for k, v in sd.items())
    expected = theirs.load_state_dict(torch_sd, strict=False)
    got = ours.load_state_dict(sd, strict=False)
    assert sorted(got.missing_keys) == sorted(expected.missing_keys)
    assert sorted(got.unexpected_keys) == sorted(expected.unexpected_keys)
    with pytest.raises(KeyError, match="scale"):
        ours.load_state_dict(sd)


def test_strict_failure_changes_nothing(trees):
    ours, _ = trees
    before = {k: v.copy() for k, v in ours.state_dict().items()}
    sd = {k: v + 1 for k, v in ours.state_dict().items()}
    del sd["scale"]
    with pytest.raises(KeyError):
        ours.load_state_dict(sd)
    for k, v in ours.state_dict().items():
        np.testing.assert_array_equal(v, before[k], err_msg=f"{k} changed by a failed load")


def test_shape_mismatch_names_the_key_and_both_shapes(trees):
    ours, theirs = trees
    sd = _torch_state_as_numpy(theirs)
    sd["heads.b.weight"] = np.ones((4, 2), np.float32)
    torch_sd = OrderedDict((k, torch.tensor(v)) for k, v in sd.items())
    with pytest.raises(RuntimeError, match="size mismatch for heads.b.weight"):
        theirs.load_state_dict(torch_sd, strict=False)          # torch refuses it too
    with pytest.raises(ValueError, match=r"heads.b.weight.*\(4, 2\).*\(1, 2\)"):
        ours.load_state_dict(sd, strict=False)


def test_state_dict_save_load_identity(tmp_path, trees):
    ours, _ = trees
    for p in ours.parameters():
        p.data[...] = np.random.default_rng(1).standard_normal(p.shape)
    ours.save(tmp_path / "tree.safetensors")
    other = _pair(nn)
    other.load(tmp_path / "tree.safetensors")
    for (k, a), (k2, b) in zip(ours.state_dict().items(), other.state_dict().items()):
        assert k == k2
        np.testing.assert_array_equal(a, b, err_msg=k)


@pytest.mark.parametrize("ext", [".npz", ".safetensors", ".h5"])
def test_property_save_load_is_the_identity(tmp_path, ext):
    from hypothesis import given, settings
    from hypothesis import strategies as st

    @settings(max_examples=15, deadline=None)
    @given(widths=st.lists(st.integers(1, 5), min_size=2, max_size=4), seed=st.integers(0, 99),
           bias=st.booleans())
    def check(widths, seed, bias):
        layers = [nn.Linear(a, b, bias=bias) for a, b in zip(widths, widths[1:])]
        model = nn.Sequential(*layers, nn.BatchNorm1d(widths[-1]))
        rng = np.random.default_rng(seed)
        for p in model.parameters():
            p.data[...] = rng.standard_normal(p.shape)
        model[-1].running_mean[...] = rng.standard_normal(widths[-1])
        path = tmp_path / f"m{ext}"
        model.save(path)
        twin = nn.Sequential(*[nn.Linear(a, b, bias=bias) for a, b in zip(widths, widths[1:])],
                             nn.BatchNorm1d(widths[-1]))
        twin.load(path)
        mine, theirs = model.state_dict(), twin.state_dict()
        assert list(mine) == list(theirs)
        for key in mine:
            assert mine[key].dtype == theirs[key].dtype, key
            np.testing.assert_array_equal(mine[key], theirs[key], err_msg=key)

    check()
