"""The fused attention path (``FusedAttention``, ``lezero.kernels.attention``) against its
NumPy reference, the plain path and PyTorch; when it is taken and when not."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import lezero as lz
import lezero.functions as F
from lezero import kernels
from lezero.functions.attention import fused
from lezero.functions.attention.fused import FusedAttention
from lezero.kernels import attention as K
from lezero.runtime import policy

pytestmark = pytest.mark.skipif(not kernels.numba_available(), reason="needs Numba")
sdpa = F.scaled_dot_product_attention


def _heads(batch, length, heads, e, seed):
    """q, k, v as GPT makes them: head views (B, heads, L, E) of one (B, L, 3 heads E)
    projection (rows strided, nothing copied)."""
    qkv = np.random.default_rng(seed).standard_normal((batch, length, 3 * heads * e))
    return [t.reshape(batch, length, heads, e).transpose(0, 2, 1, 3)
            for t in np.split(qkv.astype(np.float32), 3, axis=-1)]


def _run(q, k, v, causal, scale=0.4):
    """Output and (dq, dk, dv) for the loss sum(out * w) through ``sdpa``."""
    vs = [lz.Variable(a) for a in (q, k, v)]
    y = sdpa(*vs, is_causal=causal, scale=scale)
    w = np.random.default_rng(9).standard_normal(y.shape).astype(np.float32)
    (y * w).sum().backward()
    return y, [x.grad.data for x in vs], w


CASES = {   # name: (q, k, v)
    "gpt views, 4-D": lambda: _heads(2, 7, 3, 4, 0),
    "3-D": lambda: [np.random.default_rng(s).standard_normal(sh).astype(np.float32)
                    for s, sh in ((1, (3, 5, 4)), (2, (3, 6, 4)), (3, (3, 6, 2)))],
    "cross, L < S, Ev != E": lambda: [np.random.default_rng(s).standard_normal(sh)
                                      .astype(np.float32) for s, sh in
                                      ((4, (2, 2, 3, 5)), (5, (2, 2, 7, 5)), (6, (2, 2, 7, 3)))],
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("causal", [False, True])
def test_kernel_equals_the_numpy_reference(case, causal):
    q, k, v = CASES[case]()
    y, grads, w = _run(q, k, v, causal)
    assert isinstance(y.creator, FusedAttention)
    out, p = K.attention_forward_ref(q.astype(np.float64), k.astype(np.float64),
                                     v.astype(np.float64), 0.4, causal)
    np.testing.assert_allclose(y.data, out, rtol=1e-5, atol=1e-5)
    want = K.attention_backward_ref(q.astype(np.float64), k.astype(np.float64),
                                    v.astype(np.float64), p, w.astype(np.float64), 0.4)
    for got, ref in zip(grads, want):
        assert got.shape == ref.shape
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("causal", [False, True])
def test_matches_torch_forward_and_backward(causal):
    q, k, v = _heads(3, 9, 2, 8, 1)
    y, grads, w = _run(q, k, v, causal, scale=None)
    ts = [torch.tensor(np.ascontiguousarray(a), requires_grad=True) for a in (q, k, v)]
    ty = TF.scaled_dot_product_attention(*ts, is_causal=causal)
    (ty * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(y.data, ty.detach().numpy(), rtol=1e-5, atol=1e-5)
    for got, t in zip(grads, ts):
        np.testing.assert_allclose(got, t.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_split_over_threads_equals_one_part():
    q, k, v = _heads(4, 6, 3, 4, 2)
    with lz.using_config("conv_threads", 1):
        y1, g1, _ = _run(q, k, v, True)
    with lz.using_config("conv_threads", 2), policy.using(attention_min_part_flops=1):
        y2, g2, _ = _run(q, k, v, True)
    np.testing.assert_array_equal(y1.data, y2.data)
    for a, b in zip(g1, g2):
        np.testing.assert_array_equal(a, b)


def test_results_are_heads_last_in_memory():
    """The output of (B, heads, L, E) operands is a view of (B, L, heads, E) memory, and
    the three gradients are views of one (B, L, 3, heads, E) buffer: undoing the model's
    transpose and reshape gives the output contiguous and the gradients as the three
    adjacent slices of a (B, L, 3 heads E) array, which split's backward joins in place."""
    from lezero.kernels.join import adjacent_join
    q, k, v = _heads(2, 5, 3, 4, 3)
    y, p = K.attention_forward(q, k, v, 0.4, True)
    assert y.transpose(0, 2, 1, 3).flags.c_contiguous
    grads = K.attention_backward(q, k, v, p, np.ones_like(y), 0.4)
    rows = [g.transpose(0, 2, 1, 3).reshape(2, 5, 12) for g in grads]
    assert all(np.shares_memory(r, g) for r, g in zip(rows, grads))     # no copies
    joined = adjacent_join(rows, -1)
    assert joined is not None and joined.flags.c_contiguous
    np.testing.assert_array_equal(joined, np.concatenate(rows, axis=-1))


def test_twice_differentiable_like_the_plain_path():
    q, k, v = _heads(2, 4, 2, 3, 4)
    results = []
    for chunk in (None, 0):                       # fused, then plain
        vs = [lz.Variable(np.ascontiguousarray(a)) for a in (q, k, v)]
        y = sdpa(*vs, is_causal=True, chunk_size=chunk)
        assert isinstance(y.creator, FusedAttention) == (chunk is None)
        gq, gk, gv = lz.grad([(y * y).sum()], vs, create_graph=True)
        ((gq * gq).sum() + (gk * gv).sum()).backward()
        results.append([g.data for g in (gq, gk, gv)] + [x.grad.data for x in vs])
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_other_inputs_take_the_other_paths():
    q, k, v = _heads(2, 4, 2, 3, 5)
    mask = np.tril(np.ones((4, 4), bool))
    for kw, arrays in [(dict(), [a.astype(np.float64) for a in (q, k, v)]),   # float64
                       (dict(attn_mask=mask), [q, k, v]),
                       (dict(dropout_p=0.5), [q, k, v]),
                       (dict(chunk_size=0), [q, k, v]),
                       (dict(chunk_size=2), [q, k, v])]:
        y = sdpa(*[lz.Variable(a) for a in arrays], **kw)
        assert not isinstance(y.creator, FusedAttention), kw
    with lz.using_config("use_numba", False):
        assert not isinstance(sdpa(*[lz.Variable(a) for a in (q, k, v)]).creator,
                              FusedAttention)
    broadcast_k = np.random.default_rng(0).standard_normal((1, 2, 4, 3)).astype(np.float32)
    assert not fused.fits(q, broadcast_k, v, None, None, 0.0)            # batch broadcast
    assert not fused.fits(q[..., ::-1], k, v, None, None, 0.0)           # rows reversed
    long = np.zeros((1, 1, 1024, 64), np.float32)          # one long head: BLAS's threads
    assert fused.fits(long[..., :64, :], long[..., :64, :], long[..., :64, :], None, None, 0)
    assert not fused.fits(long, long, long, None, None, 0.0)


def test_arrays_the_kernel_does_not_take_run_the_reference():
    """A replayed graph or autocast may hand the Function other arrays (here float64 and
    reversed rows): it computes them with the reference, forward and backward."""
    q, k, v = _heads(2, 4, 2, 3, 6)
    arrays = [q.astype(np.float64), k[..., ::-1].copy()[..., ::-1], v]
    vs = [lz.Variable(a) for a in arrays]
    y = FusedAttention(0.5, True)(*vs)
    (y * y).sum().backward()
    want = [lz.Variable(a.astype(np.float64)) for a in arrays]
    yw = sdpa(*want, is_causal=True, scale=0.5, chunk_size=0)
    (yw * yw).sum().backward()
    np.testing.assert_allclose(y.data, yw.data, rtol=1e-6, atol=1e-7)
    for a, b in zip(vs, want):
        np.testing.assert_allclose(a.grad.data, b.grad.data, rtol=1e-5, atol=1e-6)
