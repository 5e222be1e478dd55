"""Tensor and pipeline parallelism in the normal suite, in a one-process world: the
vocabulary-parallel loss held to the operator checks (central differences, double
backward, PyTorch parity with label smoothing), the layers against torch, a PyTorch state
dict loaded into ParallelGPT, the collectives visible in the graph, and the argument
errors a user would hit."""
import sys

import numpy as np
import pytest

import lezero as lz
import lezero.functions as F
from lezero import nn, parallel
from lezero.nn.models.gpt import GPT, GPTConfig
from lezero.parallel.local import LocalCommunicator
from lezero.testing import check_double_backward, check_gradient, check_torch

pytestmark = pytest.mark.timeout(60)
CFG = GPTConfig(vocab_size=11, block_size=8, n_layer=2, n_head=2, d_model=8)


@pytest.fixture
def comm():
    parallel.set_grid(None)
    return LocalCommunicator("tp-alone", timeout=5)


def logits(seed=0, n=6, v=7):
    return np.random.default_rng(seed).standard_normal((n, v))


TARGET = np.array([0, 6, 3, -100, 2, 5])


@pytest.mark.parametrize("smoothing,reduction", [(0.0, "mean"), (0.15, "mean"),
                                                 (0.1, "sum"), (0.2, "none")])
def test_vocab_parallel_cross_entropy_operator_checks(comm, smoothing, reduction):
    torch = pytest.importorskip("torch")

    def fn(z):
        return parallel.vocab_parallel_cross_entropy(z, TARGET, comm, smoothing, reduction)

    def torch_fn(z):
        return torch.nn.functional.cross_entropy(z, torch.tensor(TARGET), reduction=reduction,
                                                 label_smoothing=smoothing)

    check_gradient(fn, logits())
    check_double_backward(fn, logits())
    check_torch(fn, torch_fn, logits().astype(np.float32))


def test_padded_vocabulary_alone(comm):
    z = logits(1, 4, 6)
    z[:, 5] = 100.0                                   # column 5 is padding
    t = np.array([0, 4, 2, 1])
    zv = lz.Variable(z)
    loss = parallel.vocab_parallel_cross_entropy(zv, t, comm, vocab_size=5)
    ref = F.cross_entropy(z[:, :5], t)
    np.testing.assert_allclose(loss.data, ref.data, rtol=1e-12)
    loss.backward()
    assert np.all(zv.grad.data[:, 5] == 0)


def test_layers_alone_match_torch(comm):
    torch = pytest.importorskip("torch")
    lz.manual_seed(0)
    col = parallel.ColumnParallelLinear(5, 7, comm=comm, gather_output=True)
    w, b = col.weight.data, col.bias.data
    x = np.random.default_rng(2).standard_normal((3, 5)).astype(np.float32)
    check_torch(col, lambda t: torch.nn.functional.linear(t, torch.tensor(w),
                                                          torch.tensor(b)), x)
    row = parallel.RowParallelLinear(5, 4, comm=comm, input_is_parallel=False)
    rw, rb = row.weight.data, row.bias.data
    check_torch(row, lambda t: torch.nn.functional.linear(t, torch.tensor(rw),
                                                          torch.tensor(rb)), x)
    emb = parallel.VocabParallelEmbedding(9, 3, comm)
    ew = emb.weight.data
    ids = np.array([[0, 8, 4]])
    np.testing.assert_array_equal(emb(ids).data, ew[ids])


def test_initialisation_equals_the_dense_layers(comm):
    lz.manual_seed(3)
    dense = nn.Linear(6, 4)
    lz.manual_seed(3)
    col = parallel.ColumnParallelLinear(6, 4, comm=comm)
    np.testing.assert_array_equal(col.weight.data, dense.weight.data)
    np.testing.assert_array_equal(col.bias.data, dense.bias.data)


def test_torch_state_dict_loads_into_parallel_gpt(comm):
    torch = pytest.importorskip("torch")
    lz.manual_seed(7)
    dense = GPT(CFG)
    torch_state = {k: torch.from_numpy(v.copy()) for k, v in dense.state_dict().items()}
    lz.manual_seed(0)
    par = parallel.ParallelGPT(CFG, comm)
    parallel.load_dense_state_dict(par, torch_state)
    idx = np.random.default_rng(4).integers(0, 11, (2, 8))
    np.testing.assert_allclose(par.gather_logits(par(idx)).data, dense(idx).data, rtol=1e-5,
                               atol=1e-6)
    assert par.transformer["wte"].weight is par.lm_head.weight     # still tied


def test_megatron_operators_show_in_the_graph(comm):
    col = parallel.ColumnParallelLinear(4, 6, comm=comm, gather_output=True)
    row = parallel.RowParallelLinear(6, 4, comm=comm)
    y = row(F.relu(parallel.ColumnParallelLinear(4, 6, comm=comm)(lz.Variable(np.ones((2, 4))))))
    dot = lz.utils.get_dot_graph(y)
    assert "CopyToParallelRegion" in dot and "ReduceFromParallelRegion" in dot
    assert "GatherFromParallelRegion" in lz.utils.get_dot_graph(col(np.ones((2, 4))))


def test_accounting_records_only_inside_and_names_scopes(comm):
    mlp = parallel.ParallelMLP(CFG, comm)
    x = lz.Variable(np.ones((1, 2, 8), np.float32))
    mlp(x)
    with parallel.CommAccounting(mlp, steps=2) as acc:
        for _ in range(2):
            mlp(x).backward(grad=np.ones((1, 2, 8), np.float32))
    assert [(r["layer"], r["phase"], r["count"]) for r in acc.per_layer()] == [
        ("c_proj", "forward", 1.0), ("c_fc", "backward", 1.0)]
    assert all(r["wire_bytes"] == 0 for r in acc.per_layer())   # one rank sends nothing
    mlp(x)
    assert acc.totals()["count"] == 2.0                           # nothing after the block


def test_layer_argument_errors(comm):
    with pytest.raises(TypeError, match="ColumnParallelLinear: in_features must be an int"):
        parallel.ColumnParallelLinear("3", 4, comm=comm)
    with pytest.raises(ValueError, match="ColumnParallelLinear: out_features must be a positive int"):
        parallel.ColumnParallelLinear(3, 0, comm=comm)
    with pytest.raises(TypeError, match="gather_output must be a bool"):
        parallel.ColumnParallelLinear(3, 4, comm=comm, gather_output="yes")
    with pytest.raises(TypeError, match="comm must be a lezero.parallel Communicator"):
        parallel.RowParallelLinear(3, 4, comm="world")
    with pytest.raises(ValueError, match="expected input with 3 features"):
        parallel.ColumnParallelLinear(3, 4, comm=comm)(np.zeros((2, 5), np.float32))
    with pytest.raises(TypeError, match="token ids must be integers"):
        parallel.VocabParallelEmbedding(5, 2, comm)(np.zeros(3))
    with pytest.raises(ValueError, match="d_model 8 is not divisible by n_head 3"):
        parallel.ParallelCausalSelfAttention(GPTConfig(n_head=3, d_model=8), comm)
    with pytest.raises(TypeError, match="unknown config fields"):
        parallel.ParallelGPT(CFG, comm, n_layers=3)


def test_pipeline_argument_errors(comm, monkeypatch):
    seq = nn.Sequential(nn.Linear(2, 2), nn.Tanh())
    with pytest.raises(TypeError, match="stages must be an nn.Sequential"):
        parallel.Pipeline("model", comm)
    with pytest.raises(ValueError, match="got 2 stages for 1 pipeline stages"):
        parallel.Pipeline([nn.Linear(2, 2), nn.Linear(2, 2)], comm)
    with pytest.raises(ValueError, match="cannot cut a Sequential of 2 layers into 3"):
        parallel.split_sequential(seq, 3)
    with pytest.raises(ValueError, match=r"balance \[1, 2\] covers 3 layers"):
        parallel.split_sequential(seq, 2, balance=[1, 2])
    with pytest.raises(ValueError, match="no loss_fn"):
        parallel.Pipeline(seq, comm).step(np.zeros((2, 2)), np.zeros(2, np.int64))
    monkeypatch.setitem(sys.modules, "lezero.checkpoint", None)
    with pytest.raises(ImportError, match="lz.checkpoint"):
        parallel.Pipeline(seq, comm, checkpoint=True)


def test_sequential_cut_balances_parameters():
    seq = nn.Sequential(nn.Linear(10, 10), nn.ReLU(), nn.Linear(10, 1), nn.Linear(1, 1),
                        nn.Linear(1, 10))                 # 110, 0, 11, 2, 20 parameters
    stages = parallel.split_sequential(seq, 2)
    assert [list(s._modules) for s in stages] == [["0"], ["1", "2", "3", "4"]]
    assert [list(s._modules) for s in parallel.split_sequential(seq, 5)] == [
        ["0"], ["1"], ["2"], ["3"], ["4"]]
    assert sorted(k for s in stages for k in s.state_dict()) == sorted(seq.state_dict())


@pytest.mark.gpu
def test_parallel_gpt_on_the_gpu_equals_numpy(comm):
    import cupy
    lz.manual_seed(0)
    par = parallel.ParallelGPT(CFG, comm)
    idx = np.random.default_rng(5).integers(0, 11, (2, 8))
    cpu = par.loss(idx, idx).item()
    par.to_gpu()
    gpu = par.loss(cupy.asarray(idx), cupy.asarray(idx))
    gpu.backward()
    assert abs(float(gpu.item()) - cpu) < 1e-4
    assert isinstance(par.lm_head.weight.grad.data, cupy.ndarray)
