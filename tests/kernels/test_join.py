"""adjacent_join: slices that lie side by side in one buffer join as a read-only view
equal to numpy.concatenate; anything else is left to the copy (None).  End to end, a
q/k/v split feeding the fused attention gets its gradient without a concatenation, and
the same gradient as the reference path."""
import numpy as np
import pytest

import lezero as lz
import lezero.functions as F
from lezero.kernels.join import adjacent_join


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_slices_of_one_buffer_join_as_a_read_only_view(axis):
    buf = np.arange(6 * 6 * 9, dtype=np.float32).reshape(6, 6, 9)
    cuts = np.split(buf, 3, axis=axis)
    joined = adjacent_join(cuts, axis)
    np.testing.assert_array_equal(joined, np.concatenate(cuts, axis=axis))
    assert np.shares_memory(joined, buf) and not joined.flags.writeable


def test_unequal_pieces_and_strided_buffers_join():
    buf = np.arange(5 * 12, dtype=np.float64).reshape(5, 12)[:, ::2]       # strided
    pieces = [buf[:, :1], buf[:, 1:4], buf[:, 4:]]
    np.testing.assert_array_equal(adjacent_join(pieces, 1), buf)


@pytest.mark.parametrize("case", ["copies", "order", "gap", "dtype", "one", "other shape"])
def test_anything_else_is_left_to_the_copy(case):
    buf = np.zeros((4, 9), np.float32)
    a, b, c = buf[:, :3], buf[:, 3:6], buf[:, 6:]
    pieces = {"copies": [a.copy(), b.copy(), c.copy()], "order": [b, a, c],
              "gap": [a, c], "dtype": [a, b.astype(np.float64)], "one": [a],
              "other shape": [a, buf[:3, 3:6]]}[case]
    assert adjacent_join(pieces, 1) is None


@pytest.mark.skipif(not lz.kernels.numba_available(), reason="the fused kernel needs Numba")
def test_split_feeding_fused_attention_joins_its_gradient_without_copying(monkeypatch):
    from lezero.functions.shape import join
    rng = np.random.default_rng(0)
    b, t, h, e = 2, 8, 4, 8
    data = rng.standard_normal((b, t, 3 * h * e)).astype(np.float32)
    seed = rng.standard_normal((b, h, t, e)).astype(np.float32)

    def grad():
        x = lz.Variable(data)
        q, k, v = (p.reshape(b, t, h, e).transpose(0, 2, 1, 3) for p in F.split(x, 3, axis=-1))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        y.backward(grad=lz.Variable(seed))
        return x.grad.data
    joins = []                                       # True: a view, False: a copy
    real = join.adjacent_join
    monkeypatch.setattr(join, "adjacent_join",
                        lambda gys, axis: joins.append(real(gys, axis) is not None) or real(gys, axis))
    fast = grad()
    assert joins == [True]                           # joined in place
    with lz.using_config("use_numba", False):
        reference = grad()                           # plain path: a concatenation
    assert joins == [True, False]
    np.testing.assert_allclose(fast, reference, rtol=1e-5, atol=1e-6)
