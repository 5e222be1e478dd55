"""Tensor-parallel layers against their dense single-process versions: forward and every
gradient (input and parameters), for tensor sizes 1, 2 and 4 (4 skips under -n 2; 3 cannot
run here: make test-mpi uses 2 and 4 ranks), vocabularies that do and do not divide."""
import numpy as np
import pytest

import lezero as lz
import lezero.functions as F
from lezero import nn, parallel
from lezero.nn.models.gpt import GPT, MLP, Block, CausalSelfAttention, GPTConfig
from lezero.parallel.tensor import ShardSpec, shard
from tests.parallel.tp_reference import (agree, agree_close, compare_module_grads,
                                         expected_grad, seeded, to_float64, tp_group, world)

pytestmark = [pytest.mark.mpi, pytest.mark.timeout(60)]
SIZES = [1, 2, 4]


def data(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape)


def last_axis_shard(a, comm, full=None):
    full = full or a.shape[-1]
    padded = -(-full // comm.size) * comm.size
    return shard(a, ShardSpec(-1, full, padded), comm.rank, comm.size)


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("gather,bias,out,stride", [(True, True, 12, 1), (False, True, 12, 1),
                                                    (False, False, 12, 3), (True, True, 12, 3),
                                                    (True, True, 7, 1)])
def test_column_parallel_linear(size, gather, bias, out, stride):
    comm = tp_group(size)
    dense = to_float64(seeded(lambda: nn.Linear(6, out, bias=bias)))
    par = to_float64(seeded(lambda: parallel.ColumnParallelLinear(
        6, out, bias=bias, comm=comm, gather_output=gather, stride=stride)))
    agree_close(par.weight.data, expected_grad(par, "weight", dense.weight.data),
                what="initial weight shard")
    x, xd = lz.Variable(data((4, 6), 1)), lz.Variable(data((4, 6), 1))
    w = data((4, out), 2)
    y, yd = par(x), dense(xd)
    yd.backward(grad=w)
    if gather:
        agree_close(y.data, yd.data, what="gathered output")
        y.backward(grad=w)
    else:
        mine = expected_grad(par, "weight", yd.data.T).T     # output columns = weight rows
        agree_close(y.data, mine, what="output slice")
        y.backward(grad=expected_grad(par, "weight", w.T).T)
    agree_close(x.grad.data, xd.grad.data, what="input gradient")
    compare_module_grads(par, dense)


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("parallel_input,bias", [(True, True), (False, True), (True, False)])
def test_row_parallel_linear(size, parallel_input, bias):
    comm = tp_group(size)
    dense = to_float64(seeded(lambda: nn.Linear(8, 5, bias=bias)))
    par = to_float64(seeded(lambda: parallel.RowParallelLinear(
        8, 5, bias=bias, comm=comm, input_is_parallel=parallel_input)))
    full = data((3, 8), 3)
    x = lz.Variable(last_axis_shard(full, comm) if parallel_input else full.copy())
    xd = lz.Variable(full)
    w = data((3, 5), 4)
    y, yd = par(x), dense(xd)
    agree_close(y.data, yd.data, what="output")
    y.backward(grad=w)
    yd.backward(grad=w)
    expect = last_axis_shard(xd.grad.data, comm) if parallel_input else xd.grad.data
    agree_close(x.grad.data, expect, what="input gradient")
    compare_module_grads(par, dense)


def test_row_parallel_refuses_features_that_do_not_divide():
    comm = tp_group(2)
    with pytest.raises(ValueError, match="7 does not divide into 2 tensor-parallel shards"):
        parallel.RowParallelLinear(7, 3, comm=comm)
    layer = parallel.RowParallelLinear(8, 3, comm=comm)
    with pytest.raises(ValueError, match="this rank's 4 of 8 in_features"):
        layer(lz.Variable(np.zeros((2, 8), np.float32)))


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("vocab", [12, 13])
def test_vocab_parallel_embedding(size, vocab):
    comm = tp_group(size)
    dense = to_float64(seeded(lambda: nn.Embedding(vocab, 5)))
    par = to_float64(seeded(lambda: parallel.VocabParallelEmbedding(vocab, 5, comm)))
    ids = np.array([[0, vocab - 1, 3, vocab - 1], [5, 5, 11, 2]]) % vocab
    w = data((2, 4, 5), 5)
    y, yd = par(ids), dense(ids)
    agree_close(y.data, yd.data, what="embedding")
    y.backward(grad=w)
    yd.backward(grad=w)
    compare_module_grads(par, dense)
    agree(np.all(par.weight.data[max(vocab - par.vocab_start_index, 0):] == 0),
          "padding rows stay zero")
    with pytest.raises(ValueError, match=f"token id {vocab} is out of range"):
        par(np.array([vocab]))


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("vocab,smoothing,reduction", [(12, 0.0, "mean"), (13, 0.0, "sum"),
                                                       (13, 0.1, "mean"), (12, 0.2, "none")])
def test_vocab_parallel_cross_entropy(size, vocab, smoothing, reduction):
    comm = tp_group(size)
    z_full = data((2, 3, vocab), 6) * 3
    t = np.array([[0, vocab - 1, 4], [-100, 7, vocab - 2]])
    zd = lz.Variable(z_full.reshape(6, vocab))
    ref = F.cross_entropy(zd, t.reshape(6), label_smoothing=smoothing, reduction=reduction)
    mine = last_axis_shard(z_full, comm)
    real = max(0, min(mine.shape[-1], vocab - comm.rank * mine.shape[-1]))
    mine[..., real:] = 50.0                     # padding logits must not matter
    z = lz.Variable(mine)
    loss = parallel.vocab_parallel_cross_entropy(z, t, comm, label_smoothing=smoothing,
                                                 reduction=reduction, vocab_size=vocab)
    agree_close(loss.data.reshape(-1), ref.data.reshape(-1), what="loss")
    w = data(ref.shape, 7) if reduction == "none" else None
    ref.backward(grad=w)
    loss.backward(grad=None if w is None else w.reshape(loss.shape))
    expect = last_axis_shard(zd.grad.data.reshape(2, 3, vocab), comm, vocab)
    agree_close(z.grad.data, expect, what="logit gradient (padding columns zero)")


def test_vocab_parallel_cross_entropy_checks_its_arguments():
    comm = tp_group(1)
    z = np.zeros((4, 5))
    with pytest.raises(ValueError, match=r"target has shape \(3,\)"):
        parallel.vocab_parallel_cross_entropy(z, np.zeros(3, np.int64), comm)
    with pytest.raises(ValueError, match="target 7 is out of range for a vocabulary of 5"):
        parallel.vocab_parallel_cross_entropy(z, np.array([0, 1, 7, 2]), comm)
    with pytest.raises(TypeError, match="integer class indices"):
        parallel.vocab_parallel_cross_entropy(z, np.zeros(4), comm)
    with pytest.raises(ValueError, match="reduction must be one of"):
        parallel.vocab_parallel_cross_entropy(z, np.zeros(4, np.int64), comm, reduction="avg")


CFG = GPTConfig(vocab_size=13, block_size=8, n_layer=2, n_head=4, d_model=16)


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("kind", ["attention", "mlp", "block"])
def test_transformer_parts(size, kind):
    comm = tp_group(size)
    dense_cls, par_cls = {"attention": (CausalSelfAttention, parallel.ParallelCausalSelfAttention),
                          "mlp": (MLP, parallel.ParallelMLP),
                          "block": (Block, parallel.ParallelBlock)}[kind]
    dense = to_float64(seeded(lambda: dense_cls(CFG)))
    par = to_float64(seeded(lambda: par_cls(CFG, comm)))
    x, xd = lz.Variable(data((2, 5, 16), 8)), lz.Variable(data((2, 5, 16), 8))
    w = data((2, 5, 16), 9)
    y, yd = par(x), dense(xd)
    agree_close(y.data, yd.data, what=f"{kind} output")
    y.backward(grad=w)
    yd.backward(grad=w)
    agree_close(x.grad.data, xd.grad.data, what=f"{kind} input gradient")
    compare_module_grads(par, dense)


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("vocab,tied", [(13, True), (16, False)])
def test_parallel_gpt_equals_dense(size, vocab, tied):
    comm = tp_group(size)
    cfg = GPTConfig(vocab_size=vocab, block_size=8, n_layer=2, n_head=4, d_model=16,
                    tie_weights=tied)
    dense = to_float64(seeded(lambda: GPT(cfg)))
    par = to_float64(seeded(lambda: parallel.ParallelGPT(cfg, comm)))
    rng = np.random.default_rng(10)
    idx, tgt = rng.integers(0, vocab, (3, 8)), rng.integers(0, vocab, (3, 8))
    agree_close(par.gather_logits(par(idx)).data, dense(idx).data, what="logits")
    loss, ref = par.loss(idx, tgt), dense.loss(idx, tgt)
    agree_close(loss.data, ref.data, what="loss")
    loss.backward()
    ref.backward()
    compare_module_grads(par, dense)
    full = parallel.dense_state_dict(par)
    for key, value in dense.state_dict().items():
        agree_close(full[key], value, rtol=0, atol=0, what=f"gathered {key}")


@pytest.mark.parametrize("size", [2, 4])
def test_dense_state_dict_loads_into_the_sharded_model(size):
    comm = tp_group(size)
    donor = seeded(lambda: GPT(CFG), seed=5)           # a different model's weights
    par = seeded(lambda: parallel.ParallelGPT(CFG, comm))
    parallel.load_dense_state_dict(par, donor.state_dict())
    for key, value in parallel.dense_state_dict(par).items():
        agree_close(value, donor.state_dict()[key], rtol=0, atol=0, what=key)
    with pytest.raises(KeyError, match="missing keys"):
        parallel.load_dense_state_dict(par, {"lm_head.weight": donor.lm_head.weight.data})


@pytest.fixture
def shared_base():
    """A folder every rank sees (tmp_path differs per rank); removed afterwards."""
    import shutil
    import tempfile
    w = world()
    base = w.bcast_object(tempfile.mkdtemp(prefix="lezero-tp-") if w.rank == 0 else None, 0)
    yield base
    w.barrier()
    if w.rank == 0:
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.parametrize("size", [1, 2])
def test_sharded_checkpoint_round_trip_and_atomic_versions(size, shared_base):
    import os
    comm = tp_group(size)
    path = f"{shared_base}/group{world().rank // size}"
    par = seeded(lambda: parallel.ParallelGPT(CFG, comm))
    before = {k: v.copy() for k, v in par.state_dict().items()}
    parallel.save_sharded_checkpoint(path, par, extra={"step": 3}, comm=comm)
    for p in par.parameters():
        p.data = p.data + 1.0
    with pytest.raises(RuntimeError, match="failed"):      # an unsaveable extra, all ranks
        parallel.save_sharded_checkpoint(path, par, extra={"bad": object()}, comm=comm)
    extra = parallel.load_sharded_checkpoint(path, par, comm=comm)   # version 1 intact
    agree(extra == {"step": 3}, "extra state")
    for k, v in par.state_dict().items():
        agree_close(v, before[k], rtol=0, atol=0, what=f"restored {k}")
    parallel.save_sharded_checkpoint(path, par, comm=comm)            # version 2
    dense = parallel.dense_state_dict(par)
    comm.barrier()
    if comm.rank == 0:
        merged = parallel.consolidate_checkpoint(path)
        assert sorted(merged) == sorted(dense)
        for k in dense:
            np.testing.assert_array_equal(merged[k], dense[k])
        files = sorted(f for f in os.listdir(path) if f.startswith("shard-"))
        assert len(files) == size and all(f.endswith("-v2.npz") for f in files), files
    comm.barrier()


@pytest.mark.parametrize("size", SIZES)
def test_communication_accounting_per_layer(size):
    comm = tp_group(size)
    mlp = to_float64(seeded(lambda: parallel.ParallelMLP(CFG, comm)))
    x = lz.Variable(data((2, 5, 16), 11))
    with parallel.CommAccounting(mlp, steps=1) as acc:
        mlp(x).backward(grad=np.ones((2, 5, 16)))
    rows = {(r["layer"], r["phase"], r["op"]): r for r in acc.per_layer()}
    n = 2 * 5 * 16 * 8
    assert set(rows) == {("c_proj", "forward", "allreduce"), ("c_fc", "backward", "allreduce")}
    for r in rows.values():
        assert r["count"] == 1 and r["payload_bytes"] == n
        assert r["wire_bytes"] == 2 * (size - 1) * n // size
    assert acc.totals()["count"] == 2 and "c_proj" in acc.table()


def test_dropout_masks_per_tensor_rank_inside_the_region_only():
    comm = tp_group(2)
    parallel.model_parallel_manual_seed(1234)
    x = np.ones((64,), np.float32)
    outside = F.dropout(x, 0.5, training=True).data
    with parallel.model_parallel_rng(comm):
        inside = F.dropout(x, 0.5, training=True).data
    after = lz.get_rng().random(3)
    masks = comm.allgather(np.stack([outside, inside]))
    agree(np.array_equal(masks[0][0], masks[1][0]), "replicated dropout differs across ranks")
    agree(not np.array_equal(masks[0][1], masks[1][1]), "tensor-region masks should differ")
    agree(np.array_equal(*comm.allgather(after)), "default generators out of step")
    state = lz.random.get_rng_state()                  # what lz.checkpoint restores
    with parallel.model_parallel_rng(comm):
        first = F.dropout(x, 0.5, training=True).data
    lz.random.set_rng_state(state)
    with parallel.model_parallel_rng(comm):
        again = F.dropout(x, 0.5, training=True).data
    agree(np.array_equal(first, again), "recomputation must reproduce the region's mask")
