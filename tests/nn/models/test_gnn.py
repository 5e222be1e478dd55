"""GCN and GAT: the normalised adjacency and the attention coefficients by hand, the layers
against dense PyTorch computations (forward and gradients), the models on the karate
club, and the graph datasets."""
import math

import numpy as np
import pytest
import torch

import lezero as lz
import lezero.functions as F
from lezero import nn, optim
from lezero.data.datasets import karate_club, stochastic_block_model
from lezero.nn.layers.graph import adjacency, dense_adjacency, gcn_norm, gcn_propagation
from lezero.nn.models import GAT, GCN, get_model

PATH = np.array([[0, 1, 1, 2], [1, 0, 2, 1]])          # the undirected path 0 - 1 - 2


def test_gcn_norm_of_a_path_by_hand():
    r6 = 1 / math.sqrt(6)           # degrees with self loops: 2, 3, 2
    want = [[1 / 2, r6, 0], [r6, 1 / 3, r6], [0, r6, 1 / 2]]
    np.testing.assert_allclose(gcn_norm(PATH, 3), want, rtol=1e-6)
    # a directed edge 0 -> 1 reaches node 1 only: row = target, column = source
    np.testing.assert_array_equal(dense_adjacency(np.array([[0], [1]]), 2, False),
                                  [[0, 0], [1, 0]])


def test_dense_adjacency_rejects_bad_edges():
    with pytest.raises(ValueError, match=r"dense_adjacency: edge_index must be integer pairs"):
        dense_adjacency(np.zeros((3, 2), np.int64), 4)
    with pytest.raises(ValueError, match="outside 0..2"):
        dense_adjacency(np.array([[0], [3]]), 3)


def test_gcn_conv_matches_torch_dense():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    conv = nn.GCNConv(4, 2)
    conv.bias.data[:] = [0.1, -0.2]
    xv = lz.Variable(x)
    y = conv(xv, PATH)
    (y * y).sum().backward()
    tx = torch.tensor(x, requires_grad=True)
    tw = torch.tensor(conv.lin.weight.data, requires_grad=True)
    ty = torch.from_numpy(gcn_norm(PATH, 3)) @ tx @ tw.T + torch.tensor([0.1, -0.2])
    (ty * ty).sum().backward()
    np.testing.assert_allclose(y.data, ty.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(conv.lin.weight.grad.data, tw.grad.numpy(), rtol=1e-5)
    np.testing.assert_allclose(xv.grad.data, tx.grad.numpy(), rtol=1e-5, atol=1e-6)
    assert set(dict(conv.named_parameters())) == {"lin.weight", "bias"}


def test_gat_attention_coefficients_by_hand():
    """alpha_ij = softmax over the neighbours j of i (and i) of
    LeakyReLU(a_dst . W x_i + a_src . W x_j)."""
    rng = np.random.default_rng(1)
    conv = nn.GATConv(3, 2, heads=2)
    x = rng.standard_normal((3, 3)).astype(np.float32)
    _, alpha = conv(x, PATH, return_attention_weights=True)
    h = (x @ conv.lin.weight.data.T).reshape(3, 2, 2)
    a_src, a_dst = conv.att_src.data.reshape(2, 2), conv.att_dst.data.reshape(2, 2)
    neighbours = {0: [0, 1], 1: [0, 1, 2], 2: [1, 2]}
    for k in range(2):
        for i, js in neighbours.items():
            e = [h[i, k] @ a_dst[k] + h[j, k] @ a_src[k] for j in js]
            e = [v if v > 0 else 0.2 * v for v in e]
            w = np.exp(e) / np.exp(e).sum()
            row = np.zeros(3)
            row[js] = w
            np.testing.assert_allclose(alpha.data[k, i], row, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("concat", [True, False])
def test_gat_conv_matches_torch_dense(concat):
    rng = np.random.default_rng(2)
    conv = nn.GATConv(3, 2, heads=3, concat=concat)
    conv.bias.data[:] = rng.standard_normal(conv.bias.shape)
    x = rng.standard_normal((3, 3)).astype(np.float32)
    y = conv(x, PATH)
    (y * y).sum().backward()
    params = {k: torch.tensor(v.data, requires_grad=True) for k, v in conv.named_parameters()}
    h = (torch.from_numpy(x) @ params["lin.weight"].T).view(3, 3, 2)
    s = (h * params["att_src"].view(1, 3, 2)).sum(-1)
    d = (h * params["att_dst"].view(1, 3, 2)).sum(-1)
    e = torch.nn.functional.leaky_relu(d.T[:, :, None] + s.T[:, None, :], 0.2)
    e = e.masked_fill(torch.from_numpy(dense_adjacency(PATH, 3) == 0)[None], -1e9)
    out = (e.softmax(-1) @ h.transpose(0, 1)).transpose(0, 1)
    out = (out.reshape(3, -1) if concat else out.mean(1)) + params["bias"]
    (out * out).sum().backward()
    np.testing.assert_allclose(y.data, out.detach().numpy(), rtol=1e-5, atol=1e-6)
    for name in ("lin.weight", "att_src", "att_dst", "bias"):
        np.testing.assert_allclose(dict(conv.named_parameters())[name].grad.data,
                                   params[name].grad.numpy(), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("name", ["gcn", "gat"])
def test_models_learn_the_karate_club_from_two_labels(name):
    g = karate_club()
    lz.manual_seed(0)
    model = get_model(name, in_channels=34, out_channels=2)
    opt = optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
    train = np.nonzero(g.train_mask)[0]
    for _ in range(100):
        loss = F.cross_entropy(model(g.x, g.edge_index)[train], g.y[train])
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    pred = model(g.x, g.edge_index).data.argmax(axis=1)
    assert (pred[g.test_mask] == g.y[g.test_mask]).mean() > 0.85
    assert isinstance(model, GCN if name == "gcn" else GAT)


def test_graph_datasets():
    g = karate_club()
    assert g.num_nodes == 34 and g.edge_index.shape == (2, 156)
    assert np.bincount(g.y).tolist() == [17, 17] and g.y[0] == 0 and g.y[33] == 1
    assert g.train_mask.sum() == 2 and g.test_mask.sum() == 32
    a = stochastic_block_model((20, 20, 20), 0.5, 0.02, num_features=5, train_per_class=3,
                               seed=4)
    b = stochastic_block_model((20, 20, 20), 0.5, 0.02, num_features=5, train_per_class=3,
                               seed=4)
    assert np.array_equal(a.edge_index, b.edge_index) and np.array_equal(a.x, b.x)
    assert a.x.shape == (60, 5) and a.num_classes == 3 and a.train_mask.sum() == 9
    same = a.y[a.edge_index[0]] == a.y[a.edge_index[1]]
    assert same.mean() > 0.8                      # mostly links inside communities
    with pytest.raises(ValueError, match="stochastic_block_model: p_in must be"):
        stochastic_block_model(p_in=1.5)


def _numpy_gcn_norm(edges, n, self_loops):
    """The propagation matrix written directly in NumPy (the formula, for comparison)."""
    a = np.zeros((n, n), np.float32)
    a[edges[1], edges[0]] = 1.0
    if self_loops:
        np.fill_diagonal(a, 1.0)
    deg = a.sum(axis=1)
    inv = np.where(deg > 0, 1.0 / np.sqrt(np.maximum(deg, 1e-12)), 0.0).astype(np.float32)
    return a, inv[:, None] * a * inv[None, :]


@pytest.mark.parametrize("self_loops", [True, False])
def test_adjacency_by_operators_equals_the_numpy_formula(self_loops):
    """Repeated edges count once, an existing self loop stays 1, and without self loops
    a node with no incoming edge gets a zero row (degree 0), bit for bit."""
    edges = np.array([[0, 0, 1, 2, 3, 3, 4], [1, 1, 2, 2, 0, 4, 3]])   # node 5: isolated
    a, want = _numpy_gcn_norm(edges, 6, self_loops)
    got = gcn_propagation(edges, 6, self_loops)
    assert isinstance(got, lz.Variable) and got.dtype == np.float32
    np.testing.assert_array_equal(got.data, want)
    np.testing.assert_array_equal(gcn_norm(edges, 6, self_loops), want)
    np.testing.assert_array_equal(adjacency(edges, 6, self_loops).data, a)
    assert not want[5].any() if not self_loops else want[5, 5] == 1.0


def test_traced_gcn_and_gat_follow_a_new_edge_index(tmp_path):
    """The adjacency is part of the traced graph: a replay on other edges gives the eager
    result on those edges (not the example's structure), after a save and load too."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((5, 3)).astype(np.float32)
    first, second = np.array([[0, 1, 2, 3], [1, 2, 3, 4]]), np.array([[4, 3, 2, 0], [0, 0, 1, 2]])
    for model in (GCN(3, 4, 2).eval(), GAT(3, 2, 2, heads=2).eval()):
        g = lz.jit.trace(model, x, first)
        assert "DenseAdjacency" in [n.op for n in g.graph.nodes]
        with lz.no_grad():
            want = model(x, second).data
        np.testing.assert_allclose(g(x, second).data, want, rtol=1e-6, atol=1e-7)
        assert np.abs(want - model(x, first).data).max() > 1e-4
        g.save(str(tmp_path / "g.lzg"))
        loaded = lz.jit.load(str(tmp_path / "g.lzg"))
        np.testing.assert_allclose(loaded(x, second).data, want, rtol=1e-6, atol=1e-7)
