"""Laws that hold for all inputs, checked with hypothesis: broadcasting gradients reduce to
each input's shape (and equal the explicit sum), reshape and transpose round trips."""
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import lezero as lz
import lezero.functions as F

SETTINGS = settings(max_examples=60, deadline=None)


@st.composite
def broadcastable_pair(draw):
    """Two shapes that broadcast (each dim equal, or 1 on one side; ranks may differ)."""
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=4, max_side=4))
    a = list(shape)
    b = list(shape)
    for i in range(len(shape)):
        side = draw(st.sampled_from(["both", "a1", "b1"]))
        if side == "a1":
            a[i] = 1
        elif side == "b1":
            b[i] = 1
    drop = draw(st.integers(0, len(b)))       # b may have fewer leading dims
    return tuple(a), tuple(b[drop:])


@SETTINGS
@given(pair=broadcastable_pair(), op=st.sampled_from(["add", "sub", "mul", "div",
                                                       "maximum", "hypot"]))
def test_broadcast_gradients_reduce_to_each_inputs_shape(pair, op):
    sa, sb = pair
    rng = np.random.default_rng(0)
    a = lz.Variable(rng.uniform(0.5, 1.5, sa))
    b = lz.Variable(rng.uniform(0.5, 1.5, sb) + 2.0)   # apart from a: maximum is smooth
    y = getattr(F, op)(a, b)
    gy = rng.standard_normal(y.shape)
    ga, gb = lz.grad(y, [a, b], grad_outputs=gy)
    assert ga.shape == sa and gb.shape == sb
    # The reduced gradient equals the gradient of the explicitly broadcast inputs, summed.
    full = np.broadcast_shapes(sa, sb)
    A = lz.Variable(np.broadcast_to(a.data, full).copy())
    B = lz.Variable(np.broadcast_to(b.data, full).copy())
    gA, gB = lz.grad(getattr(F, op)(A, B), [A, B], grad_outputs=gy)
    np.testing.assert_allclose(ga.data, F.sum_to(gA, sa).data, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(gb.data, F.sum_to(gB, sb).data, rtol=1e-12, atol=1e-12)


@SETTINGS
@given(shape=hnp.array_shapes(min_dims=1, max_dims=4, max_side=5), data=st.data())
def test_reshape_round_trip_and_gradient(shape, data):
    x = lz.Variable(np.arange(np.prod(shape), dtype=np.float64).reshape(shape))
    flat = int(np.prod(shape))
    divisors = [d for d in range(1, flat + 1) if flat % d == 0]
    first = data.draw(st.sampled_from(divisors))
    y = F.reshape(F.reshape(x, (first, -1)), shape)
    np.testing.assert_array_equal(y.data, x.data)
    gy = np.random.default_rng(1).standard_normal(shape)
    (gx,) = lz.grad(y, x, grad_outputs=gy)
    np.testing.assert_array_equal(gx.data, gy)


@SETTINGS
@given(shape=hnp.array_shapes(min_dims=1, max_dims=5, max_side=4), data=st.data())
def test_transpose_round_trip_and_gradient(shape, data):
    perm = tuple(data.draw(st.permutations(range(len(shape)))))
    inverse = tuple(np.argsort(perm))
    x = lz.Variable(np.random.default_rng(2).standard_normal(shape))
    y = F.transpose(x, perm)
    assert y.shape == tuple(shape[p] for p in perm)
    np.testing.assert_array_equal(F.transpose(y, inverse).data, x.data)
    gy = np.random.default_rng(3).standard_normal(y.shape)
    (gx,) = lz.grad(y, x, grad_outputs=gy)
    np.testing.assert_array_equal(gx.data, np.transpose(gy, inverse))
