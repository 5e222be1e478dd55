"""Linear, convolution, embedding, dropout and shape layers against torch.nn."""
import copy

import numpy as np
import pytest
import torch

import lezero as lz
from lezero import nn
from tests.nn.layers.layer_parity import check_layer, rand


@pytest.mark.parametrize("ours,theirs,shape", [
    (lambda: nn.Linear(5, 3), lambda: torch.nn.Linear(5, 3), (4, 5)),
    (lambda: nn.Linear(5, 3, bias=False), lambda: torch.nn.Linear(5, 3, bias=False), (2, 4, 5)),
    (lambda: nn.Conv1d(3, 4, 3, padding=1), lambda: torch.nn.Conv1d(3, 4, 3, padding=1),
     (2, 3, 7)),
    (lambda: nn.Conv2d(4, 6, 3, stride=2, groups=2, bias=False),
     lambda: torch.nn.Conv2d(4, 6, 3, stride=2, groups=2, bias=False), (2, 4, 7, 7)),
    (lambda: nn.Conv2d(3, 2, (3, 2), padding="same", dilation=2),
     lambda: torch.nn.Conv2d(3, 2, (3, 2), padding="same", dilation=2), (1, 3, 6, 5)),
    (lambda: nn.Conv3d(2, 3, 2), lambda: torch.nn.Conv3d(2, 3, 2), (1, 2, 3, 4, 3)),
    (lambda: nn.Conv2d(2, 3, 3, padding=(1, 2), padding_mode="reflect"),
     lambda: torch.nn.Conv2d(2, 3, 3, padding=(1, 2), padding_mode="reflect"), (1, 2, 5, 6)),
    (lambda: nn.Conv1d(2, 3, 4, padding="same", padding_mode="circular"),
     lambda: torch.nn.Conv1d(2, 3, 4, padding="same", padding_mode="circular"), (2, 2, 7)),
    (lambda: nn.Conv2d(2, 2, 3, padding=1, padding_mode="replicate", stride=2),
     lambda: torch.nn.Conv2d(2, 2, 3, padding=1, padding_mode="replicate", stride=2),
     (1, 2, 5, 5)),
    (lambda: nn.ConvTranspose1d(3, 2, 3, stride=2, output_padding=1),
     lambda: torch.nn.ConvTranspose1d(3, 2, 3, stride=2, output_padding=1), (2, 3, 5)),
    (lambda: nn.ConvTranspose2d(4, 2, 3, stride=2, padding=1, groups=2),
     lambda: torch.nn.ConvTranspose2d(4, 2, 3, stride=2, padding=1, groups=2), (1, 4, 4, 3)),
    (lambda: nn.Identity(54, unused="x"), lambda: torch.nn.Identity(54, unused="x"), (2, 3)),
    (lambda: nn.Flatten(), lambda: torch.nn.Flatten(), (2, 3, 4, 5)),
    (lambda: nn.Flatten(0, 2), lambda: torch.nn.Flatten(0, 2), (2, 3, 4, 5)),
    (lambda: nn.Unflatten(1, (2, 6)), lambda: torch.nn.Unflatten(1, (2, 6)), (3, 12, 2)),
], ids=["linear", "linear_nobias", "conv1d", "conv2d_groups", "conv2d_same", "conv3d",
        "conv2d_reflect", "conv1d_same_circular", "conv2d_replicate", "convT1d", "convT2d",
        "identity", "flatten", "flatten02", "unflatten"])
def test_layer_matches_torch(ours, theirs, shape):
    check_layer(ours(), theirs(), rand(*shape))


def test_bilinear_matches_torch():
    check_layer(nn.Bilinear(3, 4, 2), torch.nn.Bilinear(3, 4, 2), rand(5, 3), rand(5, 4, seed=1))


def test_lazy_layers_infer_their_input_size_and_then_match_torch():
    lz.manual_seed(0)
    lazy, conv = nn.LazyLinear(3), nn.LazyConv2d(4, 3)
    assert list(lazy.parameters()) == [] and lazy.weight is None
    lazy(lz.Variable(rand(2, 7)))
    conv(lz.Variable(rand(1, 2, 5, 5)))
    assert lazy.weight.shape == (3, 7) and conv.weight.shape == (4, 2, 3, 3)
    check_layer(lazy, torch.nn.Linear(7, 3), rand(2, 7, seed=1))
    check_layer(conv, torch.nn.Conv2d(2, 4, 3), rand(1, 2, 5, 5, seed=1))


@pytest.mark.parametrize("ours,theirs", [
    (lambda: nn.Linear(300, 200), lambda: torch.nn.Linear(300, 200)),
    (lambda: nn.Conv2d(16, 32, 3), lambda: torch.nn.Conv2d(16, 32, 3)),
    (lambda: nn.Bilinear(40, 30, 20), lambda: torch.nn.Bilinear(40, 30, 20)),
    (lambda: nn.LSTM(30, 40), lambda: torch.nn.LSTM(30, 40)),
    (lambda: nn.Embedding(200, 30), lambda: torch.nn.Embedding(200, 30)),
], ids=["linear", "conv", "bilinear", "lstm", "embedding"])
def test_default_initialisation_has_torchs_distribution(ours, theirs):
    """Same spread (std and 95th percentile of |w|) as torch's draw, to within sampling
    error, which shrinks as 1/sqrt(n) with the number n of values."""
    torch.manual_seed(0)
    t = {k: v.numpy() for k, v in theirs().state_dict().items()}
    for k, v in ours().state_dict().items():
        assert v.dtype == np.float32, k
        tol = max(0.03, 3 / np.sqrt(v.size))
        assert v.std() == pytest.approx(t[k].std(), rel=tol), k
        q95 = np.quantile(np.abs(t[k]), 0.95)
        assert np.quantile(np.abs(v), 0.95) == pytest.approx(q95, rel=tol), k


def test_initialisation_is_reproducible_from_manual_seed():
    lz.manual_seed(3)
    a = nn.Linear(4, 4).weight.data.copy()
    lz.manual_seed(3)
    np.testing.assert_array_equal(a, nn.Linear(4, 4).weight.data)


def test_embedding_matches_torch_with_padding_idx_and_max_norm():
    idx = np.array([[1, 3, 0, 3], [2, 2, 5, 0]])
    check_layer(nn.Embedding(6, 4, padding_idx=0), torch.nn.Embedding(6, 4, padding_idx=0), idx)
    check_layer(nn.Embedding(6, 4, scale_grad_by_freq=True),
                torch.nn.Embedding(6, 4, scale_grad_by_freq=True), idx)
    ours, theirs = nn.Embedding(6, 4, max_norm=1.0), torch.nn.Embedding(6, 4, max_norm=1.0)
    check_layer(ours, theirs, idx)
    np.testing.assert_allclose(ours.weight.data, theirs.weight.detach().numpy(), rtol=1e-6)


def test_embedding_padding_row_starts_at_zero_and_from_pretrained():
    emb = nn.Embedding(5, 3, padding_idx=-1)
    assert emb.padding_idx == 4 and not emb.weight.data[4].any()
    table = rand(4, 3)
    frozen = nn.Embedding.from_pretrained(table)
    table[0, 0] = 9.0                       # a copy was taken
    assert frozen.weight.data[0, 0] != 9.0 and not frozen.weight.requires_grad
    out = frozen(np.array([1, 2]))
    assert out.shape == (2, 3) and not out.requires_grad
    tuned = nn.Embedding.from_pretrained(lz.Variable(table), freeze=False, padding_idx=1)
    check_layer(tuned, torch.nn.Embedding.from_pretrained(torch.tensor(table), freeze=False,
                                                          padding_idx=1), np.array([0, 1, 1]))


def test_dropout_train_vs_eval():
    x = rand(200, 50) + 2.0
    drop = nn.Dropout(0.3)
    lz.manual_seed(0)
    y = drop(lz.Variable(x)).data
    zeros = (y == 0).mean()
    assert 0.25 < zeros < 0.35
    np.testing.assert_allclose(y[y != 0], (x / 0.7)[y != 0], rtol=1e-6)
    lz.manual_seed(0)
    np.testing.assert_array_equal(drop(lz.Variable(x)).data, y)     # seeded: reproducible
    drop.eval()
    check_layer(drop, torch.nn.Dropout(0.3), x, train=False)
    channel = nn.Dropout2d(0.5)(lz.Variable(np.ones((8, 16, 3, 3), np.float32))).data
    assert set(np.unique(channel.reshape(8, 16, 9).std(axis=2))) == {0.0}   # whole channels
    assert 0 < (channel == 0).mean() < 1
    # alpha dropout keeps zero mean and unit variance (of a standard normal input)
    normal = np.random.default_rng(0).standard_normal((400, 100)).astype(np.float32)
    alpha = nn.AlphaDropout(0.2)(lz.Variable(normal)).data
    assert abs(alpha.mean()) < 0.03 and abs(alpha.std() - 1) < 0.03
    values, counts = np.unique(alpha, return_counts=True)
    assert 0.17 < counts.max() / alpha.size < 0.23       # dropped ones share one value
    for layer in (nn.Dropout2d(0.5), nn.AlphaDropout(0.5)):
        check_layer(layer, getattr(torch.nn, type(layer).__name__)(0.5), rand(2, 3, 4, 4),
                    train=False)


def test_layers_survive_deepcopy():
    lin = nn.Linear(3, 2)
    twin = copy.deepcopy(lin)
    assert twin.weight is not lin.weight
    np.testing.assert_array_equal(twin.weight.data, lin.weight.data)


@pytest.mark.parametrize("build,error,match", [
    (lambda: nn.Linear(0, 3), ValueError, "Linear: in_features must be a positive int"),
    (lambda: nn.Conv2d(3, 4, 3, groups=2), ValueError, "Conv2d: in_channels .* divisible"),
    (lambda: nn.Conv1d(3, 4, (3, 3)), TypeError, "Conv1d: kernel_size must be"),
    (lambda: nn.Conv2d(3, 4, 3, padding_mode="mirror"), ValueError, "Conv2d: padding_mode"),
    (lambda: nn.ConvTranspose2d(3, 4, 3, padding_mode="reflect"), ValueError,
     "ConvTranspose2d: only padding_mode='zeros'"),
    (lambda: nn.Embedding(4, 2, padding_idx=4), ValueError, "Embedding: padding_idx"),
    (lambda: nn.Embedding(4, 0), ValueError, "Embedding: embedding_dim"),
    (lambda: nn.Embedding.from_pretrained(np.ones(3)), ValueError, "must be 2-D"),
    (lambda: nn.Dropout(1.5), ValueError, r"Dropout: p must be in \[0.0, 1.0\]"),
    (lambda: nn.AlphaDropout("a"), TypeError, "AlphaDropout: p must be a number"),
    (lambda: nn.Bilinear(2, 0, 1), ValueError, "Bilinear: in2_features"),
])
def test_bad_arguments(build, error, match):
    with pytest.raises(error, match=match):
        build()


def test_bad_inputs_name_the_layer():
    with pytest.raises(ValueError, match="Linear: expected input with 4 features"):
        nn.Linear(4, 2)(lz.Variable(rand(2, 3)))
    with pytest.raises(ValueError, match=r"Conv2d: expected input of shape \(N, 3"):
        nn.Conv2d(3, 4, 3)(lz.Variable(rand(1, 2, 5, 5)))
    with pytest.raises(TypeError, match="Embedding: input must hold integer indices"):
        nn.Embedding(4, 2)(lz.Variable(rand(3)))
    with pytest.raises(ValueError, match="Bilinear: "):
        nn.Bilinear(2, 3, 1)(lz.Variable(rand(4, 2)), lz.Variable(rand(4, 2)))
    with pytest.raises(ValueError, match=r"Unflatten: cannot unflatten dim 1 of size 6"):
        nn.Unflatten(1, (4, 2))(lz.Variable(rand(2, 6)))
