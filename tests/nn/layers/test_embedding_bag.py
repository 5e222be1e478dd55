"""nn.EmbeddingBag against torch.nn.EmbeddingBag: state_dict, forward, gradients, init."""
import numpy as np
import pytest
import torch

import lezero as lz
from lezero import nn
from tests.nn.layers.layer_parity import check_layer, rand

FLAT = np.array([1, 3, 0, 3, 2, 2, 5, 0, 4])
OFFSETS = np.array([0, 3, 3, 6])
GRID = np.array([[1, 3, 0, 3], [2, 2, 5, 0]])


def both(*args, **kw):
    return nn.EmbeddingBag(*args, **kw), torch.nn.EmbeddingBag(*args, **kw)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("kw", [{}, {"padding_idx": 0}, {"max_norm": 1.0}],
                         ids=["plain", "pad0", "max_norm"])
def test_matches_torch_on_1d_and_2d_inputs(mode, kw):
    ours, theirs = both(6, 4, mode=mode, **kw)
    check_layer(ours, theirs, FLAT, OFFSETS)
    ours, theirs = both(6, 4, mode=mode, **kw)
    check_layer(ours, theirs, GRID)
    if "max_norm" in kw:         # the looked-up rows were renormalised in place, alike
        np.testing.assert_allclose(ours.weight.data, theirs.weight.detach().numpy(), rtol=1e-6)


def test_include_last_offset_and_per_sample_weights():
    ours, theirs = both(6, 4, mode="sum", include_last_offset=True, padding_idx=2)
    check_layer(ours, theirs, FLAT, np.array([0, 3, 3, 6, 9]), rand(9, seed=1))
    ours, theirs = both(6, 4, mode="sum")
    check_layer(ours, theirs, GRID, None, rand(2, 4, seed=2))


def test_state_dict_keys_and_strict_load():
    ours, theirs = both(7, 3, mode="max", padding_idx=1)
    assert list(ours.state_dict()) == ["weight"]
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()}, strict=True)
    np.testing.assert_array_equal(ours.weight.data, theirs.weight.detach().numpy())


def test_initialisation_is_standard_normal_with_a_zero_padding_row():
    lz.manual_seed(0)
    bag = nn.EmbeddingBag(400, 50, padding_idx=-2)
    assert bag.padding_idx == 398 and not bag.weight.data[398].any()
    w = np.delete(bag.weight.data, 398, axis=0)
    assert w.dtype == np.float32
    assert abs(w.mean()) < 0.02 and abs(w.std() - 1) < 0.02


def test_from_pretrained():
    table = rand(5, 3, seed=3)
    frozen = nn.EmbeddingBag.from_pretrained(table, mode="sum")
    table[0, 0] = 9.0                      # a copy was taken
    assert frozen.weight.data[0, 0] != 9.0 and not frozen.weight.requires_grad
    out = frozen(np.array([[0, 1], [2, 2]]))
    assert out.shape == (2, 3) and not out.requires_grad
    tuned = nn.EmbeddingBag.from_pretrained(lz.Variable(table), freeze=False, mode="max",
                                            padding_idx=1)
    check_layer(tuned, torch.nn.EmbeddingBag.from_pretrained(
        torch.tensor(table), freeze=False, mode="max", padding_idx=1),
        np.array([0, 1, 1, 4]), np.array([0, 2]))


def test_repr_mentions_mode():
    assert "mode='sum'" in repr(nn.EmbeddingBag(4, 2, mode="sum", padding_idx=0))


@pytest.mark.parametrize("make,err,match", [
    (lambda: nn.EmbeddingBag(4, 2, mode="min"), ValueError, "EmbeddingBag: mode"),
    (lambda: nn.EmbeddingBag(4, 2, padding_idx=4), ValueError, "EmbeddingBag: padding_idx"),
    (lambda: nn.EmbeddingBag(0, 2), ValueError, "EmbeddingBag: num_embeddings"),
    (lambda: nn.EmbeddingBag(4, 2, include_last_offset="yes"), TypeError,
     "EmbeddingBag: include_last_offset must be a bool"),
    (lambda: nn.EmbeddingBag(4, 2, _weight=np.ones((3, 2))), ValueError,
     r"EmbeddingBag: _weight must have shape \(4, 2\)"),
    (lambda: nn.EmbeddingBag.from_pretrained(np.ones(3)), ValueError, "must be 2-D"),
    (lambda: nn.EmbeddingBag(4, 2)(np.array([0.0, 1.0]), np.array([0])), TypeError,
     "EmbeddingBag: input must hold integer indices"),
    (lambda: nn.EmbeddingBag(4, 2)(np.array([0, 1])), ValueError,
     "embedding_bag: offsets are required"),
    (lambda: nn.EmbeddingBag(4, 2)(np.array([[0, 1]]), per_sample_weights=np.ones(
        (1, 2), np.float32)), ValueError, "per_sample_weights are only supported"),
])
def test_bad_arguments(make, err, match):
    with pytest.raises(err, match=match):
        make()
