"""Attention: plain and chunked scaled_dot_product_attention, multi_head_attention_forward."""
import tracemalloc

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import lezero as lz
import lezero.functions as F
from lezero.functions.attention import scaled_dot_product as A
from lezero.testing import check_all, check_double_backward, check_gradient, check_torch, rand

sdpa = F.scaled_dot_product_attention


def _qkv(batch=(2,), L=3, S=4, E=3, Ev=2, seed=0):
    return (rand(*batch, L, E, seed=seed), rand(*batch, S, E, seed=seed + 1),
            rand(*batch, S, Ev, seed=seed + 2))


def _bool_mask(shape, seed):
    m = np.random.default_rng(seed).random(shape) > 0.4
    m[..., 0] = True                       # every row attends somewhere
    return m


CASES = {
    "plain": dict(),
    "causal": dict(is_causal=True),
    "bool mask": dict(attn_mask=_bool_mask((3, 4), 1)),
    "float mask": dict(attn_mask=rand(2, 1, 4, seed=2)),
    "scale": dict(scale=0.7),
}


def _torch_kw(kw):
    """Arrays as tensors; float masks in float32 like the torch-side inputs."""
    return {k: torch.tensor(v.astype(np.float32) if v.dtype.kind == "f" else v)
            if isinstance(v, np.ndarray) else v for k, v in kw.items()}


@pytest.mark.parametrize("case", list(CASES))
def test_sdpa_plain_path(case):
    kw = CASES[case]
    check_all(lambda q, k, v: sdpa(q, k, v, chunk_size=0, **kw),
              lambda q, k, v: TF.scaled_dot_product_attention(q, k, v, **_torch_kw(kw)),
              *_qkv())


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("chunk", [1, 2])
def test_sdpa_chunked_path_equals_plain_and_torch(case, chunk):
    kw = CASES[case]
    q, k, v = _qkv(batch=(2, 2), L=3, seed=3)
    fn = lambda q, k, v: sdpa(q, k, v, chunk_size=chunk, **kw)   # noqa: E731
    assert isinstance(fn(lz.Variable(q), k, v).creator, A.ChunkedAttention)
    check_gradient(fn, q, k, v)
    check_torch(fn, lambda q, k, v: TF.scaled_dot_product_attention(q, k, v, **_torch_kw(kw)),
                *[a.astype(np.float32) for a in (q, k, v)])
    vs = [lz.Variable(a) for a in (q, k, v)]
    plain = sdpa(*vs, chunk_size=0, **kw)
    gp = lz.grad([plain], vs, grad_outputs=[np.ones_like(plain.data)])
    chunked = fn(*vs)
    gc = lz.grad([chunked], vs, grad_outputs=[np.ones_like(chunked.data)])
    np.testing.assert_allclose(chunked.data, plain.data, rtol=1e-12, atol=1e-12)
    for a, b in zip(gc, gp):
        np.testing.assert_allclose(a.data, b.data, rtol=1e-10, atol=1e-12)


def test_sdpa_broadcast_batch_3d_and_gqa():
    q, _, _ = _qkv(batch=(2, 4), seed=4)
    k, v = rand(1, 2, 4, 3, seed=5), rand(1, 2, 4, 2, seed=6)
    check_all(lambda q, k, v: sdpa(q, k, v, enable_gqa=True),
              lambda q, k, v: TF.scaled_dot_product_attention(q, k, v, enable_gqa=True),
              q, k, v)
    check_all(lambda q, k, v: sdpa(q, k, v), TF.scaled_dot_product_attention,
              rand(3, 2, seed=7), rand(1, 5, 2, seed=8), rand(5, 3, seed=9))


@pytest.mark.parametrize("chunk", [0, 2])
def test_fully_masked_rows_give_zeros_as_torch(chunk):
    q, k, v = [a.astype(np.float32) for a in _qkv(seed=10)]
    mask = _bool_mask((3, 4), 11)
    mask[1] = False
    check_torch(lambda q, k, v: sdpa(q, k, v, attn_mask=mask, chunk_size=chunk),
                lambda q, k, v: TF.scaled_dot_product_attention(q, k, v,
                                                                attn_mask=torch.tensor(mask)),
                q, k, v)
    y = sdpa(q, k, v, attn_mask=mask, chunk_size=chunk)
    assert np.all(y.data[:, 1] == 0) and np.all(np.isfinite(y.data))


@pytest.mark.parametrize("chunk", [0, 2])
def test_dropout_keeps_or_rescales_each_weight_and_is_reproducible(chunk):
    q, k, _ = _qkv(batch=(1,), L=16, S=32, seed=12)
    eye = np.eye(32)                               # output = the (dropped) weights
    lz.manual_seed(5)
    dropped = sdpa(q, k, eye, dropout_p=0.25, chunk_size=chunk).data
    lz.manual_seed(5)
    again = sdpa(q, k, eye, dropout_p=0.25, chunk_size=chunk).data
    np.testing.assert_array_equal(dropped, again)
    weights = sdpa(q, k, eye, chunk_size=chunk).data
    ratio = dropped / weights
    assert np.allclose(ratio[ratio != 0], 1 / 0.75)
    assert 0.15 < np.mean(ratio == 0) < 0.35

    def fn(q, k, v):
        lz.manual_seed(6)                          # the same mask on every evaluation
        return sdpa(q, k, v, dropout_p=0.3, chunk_size=chunk)
    check_gradient(fn, *_qkv(seed=13))


def test_plain_path_is_twice_differentiable_chunked_refuses():
    check_double_backward(lambda q, k, v: sdpa(q, k, v, is_causal=True, chunk_size=0),
                          *_qkv(seed=14))
    vs = [lz.Variable(a) for a in _qkv(seed=15)]
    y = sdpa(*vs, chunk_size=1)
    (gq,) = lz.grad([(y * y).sum()], vs[:1], create_graph=True)
    np.testing.assert_allclose(gq.data, lz.grad([(y * y).sum()], vs[:1])[0].data)
    with pytest.raises(NotImplementedError, match="chunked path.*chunk_size=0"):
        (gq * gq).sum().backward()


def test_float_mask_gets_a_gradient():
    q, k, v = _qkv(seed=16)
    check_all(lambda q, k, v, m: sdpa(q, k, v, attn_mask=m),
              lambda q, k, v, m: TF.scaled_dot_product_attention(q, k, v, attn_mask=m),
              q, k, v, rand(3, 4, seed=17))


def test_auto_path_chunks_large_scores_with_linear_memory(monkeypatch):
    q, k, v = [a.astype(np.float32) for a in _qkv(batch=(1,), L=512, S=512, E=8, Ev=8,
                                                   seed=18)]
    monkeypatch.setattr(A, "AUTO_CHUNK_BYTES", 1 << 16)
    monkeypatch.setattr(A, "BLOCK_SCORES", 1 << 14)
    qv = lz.Variable(q)
    assert isinstance(sdpa(qv, k, v).creator, A.ChunkedAttention)
    assert not isinstance(sdpa(qv[:, :8], k[:, :8], v[:, :8]).creator, A.ChunkedAttention)

    def peak(chunk):
        vs = [lz.Variable(a) for a in (q, k, v)]
        tracemalloc.start()
        sdpa(*vs, chunk_size=chunk).sum().backward()
        size = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return size
    scores = 512 * 512 * 4
    assert peak(0) > 2 * scores          # the plain path holds whole score matrices
    assert peak(32) < scores / 2         # chunks of 32 rows hold 1/16 of one


def test_sdpa_bad_inputs():
    q, k, v = _qkv()
    with pytest.raises(ValueError, match="scaled_dot_product_attention: expected query"):
        sdpa(q, k[..., :2], v)
    with pytest.raises(TypeError, match="share a dtype"):
        sdpa(q.astype(np.float32), k, v)
    with pytest.raises(ValueError, match="attn_mask or is_causal"):
        sdpa(q, k, v, attn_mask=np.ones((3, 4), bool), is_causal=True)
    with pytest.raises(ValueError, match="attn_mask of shape .* does not broadcast"):
        sdpa(q, k, v, attn_mask=np.ones((3, 5), bool))
    with pytest.raises(TypeError, match="attn_mask must be bool or floating"):
        sdpa(q, k, v, attn_mask=np.ones((3, 4), np.int64))
    with pytest.raises(ValueError, match="dropout_p"):
        sdpa(q, k, v, dropout_p=1.0)
    with pytest.raises(ValueError, match="chunk_size"):
        sdpa(q, k, v, chunk_size=-1)
    with pytest.raises(ValueError, match="batch dims"):
        sdpa(q, rand(3, 4, 3), rand(3, 4, 2))
    with pytest.raises(ValueError, match="multiple of key"):
        sdpa(rand(1, 3, 2, 2), rand(1, 2, 2, 2), rand(1, 2, 2, 2), enable_gqa=True)


# ----- multi-head attention -------------------------------------------------------------

E, HEADS, L, S, N = 4, 2, 3, 4, 2


def _mha_arrays(kdim=E, vdim=E, seed=20):
    return dict(query=rand(L, N, E, seed=seed), key=rand(S, N, kdim, seed=seed + 1),
                value=rand(S, N, vdim, seed=seed + 2),
                in_proj_weight=rand(3 * E, E, seed=seed + 3),
                in_proj_bias=rand(3 * E, seed=seed + 4),
                out_proj_weight=rand(E, E, seed=seed + 5), out_proj_bias=rand(E, seed=seed + 6))


def _mha_pair(names, **options):
    """LeZero and torch callables taking the named arrays positionally."""
    def call(fn, module, arrays):
        kw = dict(zip(names, arrays))
        opts = {k: (module.tensor(v) if module is torch and isinstance(v, np.ndarray) else v)
                for k, v in options.items()}
        args = dict(bias_k=None, bias_v=None, add_zero_attn=False, dropout_p=0.0,
                    in_proj_weight=None, in_proj_bias=None)
        args.update(opts)
        args.update(kw)
        out, w = fn(args.pop("query"), args.pop("key"), args.pop("value"), E, HEADS,
                    args.pop("in_proj_weight"), args.pop("in_proj_bias"), args.pop("bias_k"),
                    args.pop("bias_v"), args.pop("add_zero_attn"), args.pop("dropout_p"),
                    args.pop("out_proj_weight"), args.pop("out_proj_bias"), **args)
        return [out] if w is None else [out, w]
    return (lambda *a: call(F.multi_head_attention_forward, np, a),
            lambda *a: call(TF.multi_head_attention_forward, torch, a))


MHA_CASES = {
    "plain": dict(),
    "masks": dict(key_padding_mask=np.array([[0, 0, 0, 1], [0, 1, 0, 0]], bool),
                  attn_mask=np.triu(np.ones((L, S), bool), 2)),
    "float 3-D mask, per head": dict(attn_mask=rand(N * HEADS, L, S, seed=30, dtype=np.float32),
                                     average_attn_weights=False),
    "zero attn": dict(add_zero_attn=True, key_padding_mask=np.eye(N, S, dtype=bool)),
    "no weights": dict(need_weights=False, attn_mask=np.triu(np.ones((L, S), bool), 1)),
}


@pytest.mark.parametrize("case", list(MHA_CASES))
def test_mha_matches_torch(case):
    arrays = _mha_arrays()
    lz_fn, t_fn = _mha_pair(list(arrays), **MHA_CASES[case])
    check_torch(lz_fn, t_fn, *[a.astype(np.float32) for a in arrays.values()])
    if case in ("plain", "masks"):
        check_gradient(lz_fn, *arrays.values())


def test_mha_bias_kv_separate_weights_unbatched_and_double_backward():
    arrays = _mha_arrays(kdim=3, vdim=5)
    del arrays["in_proj_weight"]
    arrays.update(q_proj_weight=rand(E, E, seed=40), k_proj_weight=rand(E, 3, seed=41),
                  v_proj_weight=rand(E, 5, seed=42), bias_k=rand(1, 1, E, seed=43),
                  bias_v=rand(1, 1, E, seed=44))
    lz_fn, t_fn = _mha_pair(list(arrays), use_separate_proj_weight=True)
    check_torch(lz_fn, t_fn, *[a.astype(np.float32) for a in arrays.values()])
    check_double_backward(lz_fn, *arrays.values())
    single = {k: (v[:, 0] if k in ("query", "key", "value") else v) for k, v in arrays.items()}
    lz_fn, t_fn = _mha_pair(list(single), use_separate_proj_weight=True)
    check_torch(lz_fn, t_fn, *[a.astype(np.float32) for a in single.values()])


def test_mha_static_kv_and_eval_mode_dropout():
    arrays = _mha_arrays()
    arrays.update(static_k=rand(N * HEADS, 5, E // HEADS, seed=50),
                  static_v=rand(N * HEADS, 5, E // HEADS, seed=51))
    lz_fn, t_fn = _mha_pair(list(arrays), dropout_p=0.5, training=False)
    check_torch(lz_fn, t_fn, *[a.astype(np.float32) for a in arrays.values()])


def test_mha_bad_inputs():
    a = _mha_arrays()
    mha = F.multi_head_attention_forward
    args = (a["query"], a["key"], a["value"], E, HEADS, a["in_proj_weight"], a["in_proj_bias"],
            None, None, False, 0.0, a["out_proj_weight"], a["out_proj_bias"])
    with pytest.raises(ValueError, match="multi_head_attention_forward: query's embedding"):
        mha(*args[:3], E + 1, *args[4:])
    with pytest.raises(ValueError, match="not divisible by num_heads"):
        mha(*args[:4], 3, *args[5:])
    with pytest.raises(ValueError, match="key_padding_mask must be"):
        mha(*args, key_padding_mask=np.zeros((N, S + 1), bool))
    with pytest.raises(ValueError, match="2-D attn_mask must be"):
        mha(*args, attn_mask=np.zeros((L, L), bool))
    with pytest.raises(ValueError, match="is_causal is a hint"):
        mha(*args, is_causal=True)
    with pytest.raises(ValueError, match="both bias_k and bias_v"):
        mha(*args[:7], rand(1, 1, E), None, *args[9:])


def test_mha_checks_every_argument_before_computing():
    a = _mha_arrays()
    mha = F.multi_head_attention_forward
    args = [a["query"], a["key"], a["value"], E, HEADS, a["in_proj_weight"], a["in_proj_bias"],
            None, None, False, 0.0, a["out_proj_weight"], a["out_proj_bias"]]

    def with_arg(i, value, **kwargs):
        return mha(*args[:i], value, *args[i + 1:], **kwargs)

    op = "multi_head_attention_forward: "
    for i, name, bad in [(3, "embed_dim_to_check", float(E)), (4, "num_heads", "2"),
                         (7, "bias_k", "abc"), (8, "bias_v", [0.0] * E),
                         (9, "add_zero_attn", 1), (10, "dropout_p", "0.1"),
                         (6, "in_proj_bias", "abc"), (11, "out_proj_weight", [[0.0]]),
                         (12, "out_proj_bias", "abc")]:
        with pytest.raises(TypeError, match=op + name):
            with_arg(i, bad)
    with pytest.raises(ValueError, match=op + r"dropout_p must be in \[0, 1\]"):
        with_arg(10, 1.5)
    with pytest.raises(ValueError, match=op + r"in_proj_bias must have shape \(12,\)"):
        with_arg(6, rand(E))
    with pytest.raises(ValueError, match=op + "out_proj_weight must have shape"):
        with_arg(11, rand(E, E + 1))
    with pytest.raises(ValueError, match=op + "out_proj_bias must have shape"):
        with_arg(12, rand(E + 1))
    with pytest.raises(ValueError, match=op + "bias_k must hold one"):
        mha(*args[:7], rand(1, 2, E), rand(1, 1, E), *args[9:])
    with pytest.raises(TypeError, match=op + "need_weights must be a bool"):
        mha(*args, need_weights="yes")


def test_mha_dropout_of_one_drops_every_weight():
    a = _mha_arrays()
    args = (a["query"], a["key"], a["value"], E, HEADS, a["in_proj_weight"], None,
            None, None, False, 1.0, a["out_proj_weight"], None)
    for need_weights in (True, False):
        out, weights = F.multi_head_attention_forward(*args, need_weights=need_weights)
        np.testing.assert_array_equal(out.data, 0.0)
        assert (weights is None) == (not need_weights)
