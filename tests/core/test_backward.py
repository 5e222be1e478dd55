"""The backward engine: ordering, accumulation, retain_grad, lz.grad, higher order vs torch."""
import gc
import tracemalloc

import numpy as np
import pytest
import torch

import lezero as lz
import lezero.functions as F


def V(*shape, seed=0, dtype=np.float64):
    return lz.Variable(np.random.default_rng(seed).standard_normal(shape).astype(dtype))


def test_diamond_graph_visits_each_function_once_and_accumulates():
    x = lz.Variable(np.array(3.0))
    a = x * x            # 9
    y = a + a * 2        # the same a used twice: dy/da = 3, dy/dx = 3 * 2x = 18
    y.backward()
    assert x.grad.data == pytest.approx(18.0)


def test_reused_leaf_accumulates_and_cleargrad_resets():
    x = lz.Variable(np.array(2.0))
    y = x + x + x
    y.backward()
    assert x.grad.item() == 3.0
    y = x * x
    y.backward()
    assert x.grad.item() == 3.0 + 4.0       # accumulates across calls, as in PyTorch
    x.cleargrad()
    (x * x).backward()
    assert x.grad.item() == 4.0


def test_generation_order_on_a_deep_branchy_graph_matches_torch():
    rng = np.random.default_rng(1)
    data = rng.standard_normal(5)
    x = lz.Variable(data.copy())
    t = torch.tensor(data, requires_grad=True)

    def build(m, x):
        h = x
        outs = []
        for i in range(6):
            h = m.tanh(h) * (i + 1) + h
            outs.append(h)
        total = outs[0]
        for o in outs[1:]:
            total = total + o * o
        return total.sum()

    build(F, x).backward()
    build(torch, t).backward()
    np.testing.assert_allclose(x.grad.data, t.grad.numpy(), rtol=1e-12)


def test_intermediate_grads_dropped_unless_retained():
    x = lz.Variable(np.array(2.0))
    h = x * 3
    y = h * h
    y.backward()
    assert h.grad is None and y.grad is None
    x.cleargrad()
    y = (x * 3) ** 2
    h = y.creator.inputs[0]
    y.backward(retain_grad=True)
    assert h.grad.item() == pytest.approx(12.0)
    assert y.grad.item() == 1.0


def test_constants_get_no_gradient_and_function_knows_it():
    x = lz.Variable(np.ones(3))
    c = np.full(3, 2.0)
    y = x * c
    assert y.creator.needs_input_grad == (True, False)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.data, [2, 2, 2])
    const = lz.Variable(np.ones(3), requires_grad=False)
    z = const * 2
    assert not z.requires_grad and z.creator is None
    with pytest.raises(ValueError, match="does not require grad"):
        z.sum().backward()


def test_leaf_grad_owns_writable_memory():
    x = lz.Variable(np.ones((2, 3)))
    y = lz.Variable(np.ones((2, 3)))
    (x.sum() + (x + y).sum()).backward()
    assert x.grad.data.flags.writeable and x.grad.data.base is None
    x.grad.data *= 0.5            # in-place, as optimizers and clipping do
    np.testing.assert_array_equal(y.grad.data, np.ones((2, 3)))
    z = lz.Variable(np.ones(2))
    seed = np.array([1.0, 2.0])
    (z + 0).backward(grad=seed)
    z.grad.data[:] = 0
    np.testing.assert_array_equal(seed, [1.0, 2.0])


def test_backward_with_grad_argument_and_bad_shape():
    x = V(3)
    y = x * 2
    y.backward(grad=np.array([1.0, 0.0, 2.0]))
    np.testing.assert_array_equal(x.grad.data, [2, 0, 4])
    with pytest.raises(ValueError, match=r"shape \(2,\).*shape \(3,\)"):
        (x * 2).backward(grad=np.ones(2))


def test_multi_output_function_with_unused_output_is_zero_filled():
    class Split2(lz.Function):
        def forward(self, x):
            return x[:2].copy(), x[2:].copy()

        def backward(self, g0, g1):
            return Cat()(g0, g1)

    class Cat(lz.Function):
        def forward(self, a, b):
            return np.concatenate([a, b])

        def backward(self, g):
            return g[:2], g[2:]

    x = lz.Variable(np.arange(5.0))
    a, b = Split2()(x)
    (a * 3).sum().backward()
    np.testing.assert_array_equal(x.grad.data, [3, 3, 0, 0, 0])


def test_function_backward_errors_name_the_function():
    class Bad(lz.Function):
        def forward(self, x):
            return x * 2

        def backward(self, gy):
            return gy[:1]

    x = lz.Variable(np.ones(3))
    with pytest.raises(ValueError, match="Bad.backward returned a gradient of shape"):
        Bad()(x).sum().backward()

    class NoBackward(lz.Function):
        def forward(self, x):
            return x

    with pytest.raises(NotImplementedError, match="NoBackward.backward"):
        NoBackward()(x).sum().backward()


# ----- lz.grad ----------------------------------------------------------------------------

def test_grad_returns_tuple_and_leaves_dot_grad_untouched():
    x, w = V(4, seed=1), V(4, seed=2)
    y = (x * w).sum()
    gx, gw = lz.grad(y, [x, w])
    np.testing.assert_allclose(gx.data, w.data)
    np.testing.assert_allclose(gw.data, x.data)
    assert x.grad is None and w.grad is None


def test_grad_with_grad_outputs_as_array_or_variable():
    x = V(3)
    y = x * 2
    (g1,) = lz.grad(y, x, grad_outputs=np.array([1.0, 2.0, 3.0]), retain_graph=True)
    (g2,) = lz.grad(y, [x], grad_outputs=[lz.Variable(np.array([1.0, 2.0, 3.0]))])
    np.testing.assert_array_equal(g1.data, [2, 4, 6])
    np.testing.assert_array_equal(g2.data, g1.data)


def test_grad_unused_input_raises_or_gives_none():
    x, z = V(3), V(3, seed=5)
    y = (x * x).sum()
    with pytest.raises(ValueError, match=r"inputs\[1\].*allow_unused"):
        lz.grad(y, [x, z], retain_graph=True)
    gx, gz = lz.grad(y, [x, z], allow_unused=True)
    assert gz is None and gx is not None


def test_grad_with_respect_to_an_intermediate():
    x = V(3)
    h = x * 2
    y = (h * h).sum()
    (gh,) = lz.grad(y, h)
    np.testing.assert_allclose(gh.data, 2 * h.data)


def _torch_nth(f_t, x0, n):
    t = torch.tensor(x0, requires_grad=True)
    y = f_t(t)
    out = []
    for _ in range(n):
        (y,) = torch.autograd.grad(y.sum(), t, create_graph=True)
        out.append(y.detach().numpy().copy())
    return out


@pytest.mark.parametrize("name,f_lz,f_t", [
    ("poly", lambda m, x: x ** 4 - 2 * x ** 3 + x, None),
    ("tanh", lambda m, x: m.tanh(x), None),
    ("sin*exp", lambda m, x: m.sin(x) * m.exp(x / 2), None),
    ("log-div", lambda m, x: m.log(x * x + 1) / (x + 3), None),
])
def test_nth_derivatives_match_torch(name, f_lz, f_t):
    x0 = np.array([0.3, -1.2, 2.0])
    expected = _torch_nth(lambda t: f_lz(torch, t), x0, 4)
    x = lz.Variable(x0.copy())
    y = f_lz(F, x)
    for n in range(4):
        (y,) = lz.grad(y.sum(), x, create_graph=True)
        np.testing.assert_allclose(y.data, expected[n], rtol=1e-8, atol=1e-10,
                                   err_msg=f"derivative {n + 1} of {name}")


def test_backward_create_graph_matches_double_backward_of_torch():
    x = lz.Variable(np.array(1.5))
    y = x ** 3 * F.sin(x)
    y.backward(create_graph=True)
    gx = x.grad
    x.cleargrad()
    gx.backward()
    t = torch.tensor(1.5, dtype=torch.float64, requires_grad=True)
    (g,) = torch.autograd.grad(t ** 3 * torch.sin(t), t, create_graph=True)
    (gg,) = torch.autograd.grad(g, t)
    assert x.grad.item() == pytest.approx(gg.item(), rel=1e-10)


def _mlp(m, x, w1, b1, w2):
    h = m.tanh(x @ w1 + b1)
    return (h @ w2).sum()


def test_hessian_vector_product_matches_torch():
    rng = np.random.default_rng(3)
    arrs = [rng.standard_normal(s) for s in [(4, 3), (3, 5), (5,), (5, 1)]]
    v = [rng.standard_normal(a.shape) for a in arrs[1:]]
    x, w1, b1, w2 = [lz.Variable(a.copy()) for a in arrs]
    gs = lz.grad(_mlp(F, x, w1, b1, w2), [w1, b1, w2], create_graph=True)
    dot = sum(((g * vv).sum() for g, vv in zip(gs, v)), start=lz.Variable(np.array(0.0)))
    hv = lz.grad(dot, [w1, b1, w2])

    tx, tw1, tb1, tw2 = [torch.tensor(a, requires_grad=True) for a in arrs]
    tg = torch.autograd.grad(_mlp(torch, tx, tw1, tb1, tw2), [tw1, tb1, tw2], create_graph=True)
    tdot = sum((g * torch.tensor(vv)).sum() for g, vv in zip(tg, v))
    thv = torch.autograd.grad(tdot, [tw1, tb1, tw2])
    for a, b in zip(hv, thv):
        np.testing.assert_allclose(a.data, b.numpy(), rtol=1e-8, atol=1e-12)


def test_gradient_penalty_through_an_mlp_matches_torch():
    """WGAN-GP style: the penalty on ||d out / d x|| trains the weights (double backprop)."""
    rng = np.random.default_rng(4)
    arrs = [rng.standard_normal(s) for s in [(6, 3), (3, 8), (8,), (8, 1)]]
    x, w1, b1, w2 = [lz.Variable(a.copy()) for a in arrs]
    (gx,) = lz.grad(_mlp(F, x, w1, b1, w2), x, create_graph=True)
    norms = ((gx * gx).sum(axis=1) + 1e-12) ** 0.5
    penalty = ((norms - 1) ** 2).sum()
    penalty.backward()

    tx, tw1, tb1, tw2 = [torch.tensor(a, requires_grad=True) for a in arrs]
    (tgx,) = torch.autograd.grad(_mlp(torch, tx, tw1, tb1, tw2), tx, create_graph=True)
    tpen = ((((tgx * tgx).sum(1) + 1e-12) ** 0.5 - 1) ** 2).sum()
    tpen.backward()
    assert penalty.item() == pytest.approx(tpen.item(), rel=1e-10)
    for ours, theirs in [(w1, tw1), (b1, tb1), (w2, tw2), (x, tx)]:
        np.testing.assert_allclose(ours.grad.data, theirs.grad.numpy(), rtol=1e-8, atol=1e-12)


# ----- memory -----------------------------------------------------------------------------

def test_training_loop_without_gc_holds_steady_memory():
    """Outputs are weak references, so graphs die by reference counting alone."""
    rng = np.random.default_rng(0)
    w1 = lz.Parameter(rng.standard_normal((32, 64)).astype(np.float32) * 0.1)
    w2 = lz.Parameter(rng.standard_normal((64, 1)).astype(np.float32) * 0.1)
    x = rng.standard_normal((16, 32)).astype(np.float32)
    t = rng.standard_normal((16, 1)).astype(np.float32)

    def step():
        y = F.tanh(x @ w1) @ w2
        loss = ((y - t) ** 2).sum() / 16
        w1.cleargrad()
        w2.cleargrad()
        loss.backward()
        for p in (w1, w2):
            p.data -= 0.01 * p.grad.data
        return loss.item()

    gc.disable()
    try:
        for _ in range(300):    # warm-up: NumPy fills small internal caches at first
            step()
        tracemalloc.start()
        samples = []
        for i in range(200):
            step()
            if i % 20 == 19:
                samples.append(tracemalloc.get_traced_memory()[0])
        tracemalloc.stop()
    finally:
        gc.enable()
    assert max(samples) - min(samples) < 64 * 1024, samples


def test_graph_is_freed_when_output_dies():
    import weakref
    x = lz.Variable(np.ones(100))
    y = F.exp(x) * 2
    f_ref = weakref.ref(y.creator)
    del y
    assert f_ref() is None


def test_leaf_grads_that_are_views_of_one_buffer_are_separated():
    x = lz.Variable(np.ones((2, 3)))
    x2 = lz.Variable(np.ones(6))
    (F.reshape(x, (6,)) + x2).sum().backward()      # both grads derive from one array
    x2.grad.data[:] = 5
    np.testing.assert_array_equal(x.grad.data, np.ones((2, 3)))


def test_backward_with_a_positional_gradient_names_the_keyword():
    # A PyTorch habit: y.backward(upstream).  Here the first argument is retain_grad.
    x = lz.Variable(np.array([1.0, 2.0]))
    y = x * 3.0
    with pytest.raises(TypeError, match=r"backward: retain_grad must be a bool, got ndarray;"
                                        r" pass an upstream gradient as backward\(grad=\.\.\.\)"):
        y.backward(np.array([1.0, 1.0]))
    with pytest.raises(TypeError, match="create_graph must be a bool, got str"):
        y.backward(create_graph="yes")
    y.backward(grad=np.array([1.0, 0.5]))
    np.testing.assert_array_equal(x.grad.data, [3.0, 1.5])
