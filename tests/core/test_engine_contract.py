"""The backward engine's contract, case by case: several outputs, leaf outputs, what a
gradient is (a constant Variable in the output's dtype, owned memory), accumulation with
and without ``create_graph``, the hooks' timing, ``count_leaf_uses`` and the messages.

tests/core/test_backward.py checks the engine on whole graphs against torch; this file
pins the rules that a graph-level check passes without noticing.
"""
import re

import numpy as np
import pytest
import torch

import lezero as lz
import lezero.functions as F
from lezero.core import Function, FunctionHook, backward, count_leaf_uses, grad


def var(*values, dtype=np.float64):
    return lz.Variable(np.array(values, dtype=dtype))


def assert_constant(g):
    """A gradient of a first-order pass: a Variable outside any graph."""
    assert isinstance(g, lz.Variable)
    assert g.creator is None and g.requires_grad is False


# ----- several outputs, and outputs that are leaves -------------------------------------
def test_backward_of_an_output_and_its_own_descendant_matches_torch():
    """``backward([y, z])`` with z computed from y: z's part must reach y before y's
    creator runs (latest generation first, also among the starting outputs)."""
    data = np.array([0.3, -1.2, 2.0])
    x = lz.Variable(data.copy())
    y = F.sin(x)
    z = F.exp(y) * y
    backward([y.sum(), z.sum()])
    xt = torch.tensor(data, requires_grad=True)
    yt = torch.sin(xt)
    torch.autograd.backward([yt.sum(), (torch.exp(yt) * yt).sum()])
    np.testing.assert_allclose(x.grad.data, xt.grad.numpy(), rtol=1e-14)
    assert_constant(x.grad)


def test_grad_of_several_outputs_without_grad_outputs():
    x = var(1.0, 2.0)
    y, z = (x * x).sum(), (x * 3.0).sum()
    (g,) = grad([y, z], [x])
    np.testing.assert_allclose(g.data, [5.0, 7.0])        # 2x + 3
    assert_constant(g)
    assert x.grad is None


@pytest.mark.parametrize("create_graph", [False, True])
def test_one_function_on_a_leaf_used_twice_sums_both_uses(create_graph):
    """A graph of one Function whose inputs are one leaf twice (``x * x``): both uses
    reach the gradient, in ``grad`` (a result, not ``.grad``) as in ``backward``."""
    x = var(1.5, -2.0)
    (g,) = grad(x * x, [x], create_graph=create_graph)
    np.testing.assert_allclose(g.data, [3.0, -4.0])       # 2x
    (x * x).backward(create_graph=create_graph)
    np.testing.assert_allclose(x.grad.data, [3.0, -4.0])
    (g,) = grad(F.einsum("i,i->", x, x), [x])
    np.testing.assert_allclose(g.data, [3.0, -4.0])


def test_the_same_output_twice_counts_twice():
    x = var(1.0, 3.0)
    y = (x * x).sum()
    (g,) = grad([y, y], [x], retain_graph=True)
    np.testing.assert_allclose(g.data, [4.0, 12.0])       # as torch.autograd.grad([y, y])
    backward([y, y], grad_outputs=[np.array(1.0), np.array(0.5)])
    np.testing.assert_allclose(x.grad.data, [3.0, 9.0])


def test_backward_from_a_leaf_gives_it_the_seed():
    x = var(1.0, 2.0, 3.0)
    x.backward()
    np.testing.assert_array_equal(x.grad.data, [1.0, 1.0, 1.0])
    assert_constant(x.grad)
    x.backward(grad=np.array([2.0, 0.0, -1.0]))
    np.testing.assert_array_equal(x.grad.data, [3.0, 1.0, 0.0])


def test_module_level_backward_with_retain_grad_and_grad_outputs():
    x = var(1.0, 2.0)
    h = x * 3.0
    y = h * h
    backward(y, grad_outputs=[np.array([1.0, -1.0])], retain_grad=True)
    np.testing.assert_allclose(x.grad.data, [18.0, -36.0])   # 2 * 9x * seed
    np.testing.assert_allclose(h.grad.data, [6.0, -12.0])
    np.testing.assert_array_equal(y.grad.data, [1.0, -1.0])
    for g in (x.grad, h.grad, y.grad):
        assert_constant(g)


def test_module_level_backward_defaults_and_create_graph():
    x = var(2.0)
    h = x * x
    y = h * x                    # x^3
    backward(y, retain_graph=True)
    assert h.grad is None and y.grad is None                 # retain_grad=False
    assert_constant(x.grad)
    assert x.grad.data[0] == 12.0
    x.cleargrad()
    backward([y], create_graph=True)
    assert x.grad.creator is not None
    (gg,) = grad(x.grad, [x])
    assert gg.data[0] == pytest.approx(12.0)                 # 6x


# ----- what a gradient is -----------------------------------------------------------------
def test_first_order_gradients_are_constants_without_a_graph():
    x = var(1.0, 2.0)
    y = x * x * x                      # Mul's backward multiplies Variables: no graph kept
    y.backward(retain_grad=True)
    for g in (x.grad, y.grad):
        assert_constant(g)
    np.testing.assert_allclose(x.grad.data, [3.0, 12.0])
    (g,) = grad((x * x).sum(), [x])
    assert_constant(g)


def test_a_scalar_upstream_gradient_takes_the_outputs_dtype():
    x = lz.Variable(np.array(1.5, dtype=np.float64))
    y = x * x
    y.backward(grad=2.0, retain_grad=True)
    assert y.grad.dtype == np.float64 and y.grad.data == 2.0
    assert_constant(y.grad)
    assert x.grad.dtype == np.float64 and x.grad.data == 6.0
    (g,) = grad(x * 3.0, [x], grad_outputs=[0.5])
    assert g.dtype == np.float64 and g.data == 1.5


def test_accumulated_gradients_are_constants():
    x = var(2.0, -1.0)
    (x * x + x).sum().backward()       # three uses of x summed by the engine
    np.testing.assert_allclose(x.grad.data, [5.0, -1.0])
    assert_constant(x.grad)


def test_broadcast_gradient_is_copied_into_writable_owned_memory():
    x = var(1.0, 2.0, 3.0)
    x.sum().backward()                 # sum's backward broadcasts: a read-only view
    assert_constant(x.grad)
    assert x.grad.data.flags.writeable and x.grad.data.base is None
    x.grad.data[0] = 5.0
    np.testing.assert_array_equal(x.grad.data, [5.0, 1.0, 1.0])


def test_two_leaves_given_one_gradient_array_get_their_own_memory():
    a, b = var(1.0, 2.0), var(3.0, 4.0)
    y = a + b                          # Add's backward hands both the same seed array
    y.backward()
    assert not np.shares_memory(a.grad.data, b.grad.data)
    a.grad.data += 1.0
    np.testing.assert_array_equal(b.grad.data, [1.0, 1.0])


class TwoViews(Function):
    """``a + b`` whose backward returns two overlapping views of one fresh array."""

    def forward(self, a, b):
        return a + b

    def backward(self, gy):
        buf = np.concatenate([gy.data, gy.data])
        n = gy.data.size
        first, second = buf[:n], buf[:n]          # two view objects of the same memory
        return lz.Variable(first, requires_grad=False), lz.Variable(second, requires_grad=False)


def test_views_of_one_buffer_given_to_two_leaves_are_separated():
    a, b = var(1.0, 2.0), var(3.0, 4.0)
    TwoViews()(a, b).backward()
    assert not np.shares_memory(a.grad.data, b.grad.data)
    a.grad.data *= 10.0
    np.testing.assert_array_equal(b.grad.data, [1.0, 1.0])
    np.testing.assert_array_equal(a.grad.data, [10.0, 10.0])


class ArrayGrads(Function):
    """``a * b`` whose backward returns raw arrays and None for ``b``."""

    def forward(self, a, b):
        return a * b

    def backward(self, gy):
        a, b = self.inputs
        return gy.data * b.data, None


def test_backward_may_return_arrays_and_none():
    a, b = var(1.0, 2.0), var(3.0, 5.0)
    ArrayGrads()(a, b).backward()
    np.testing.assert_array_equal(a.grad.data, [3.0, 5.0])
    assert_constant(a.grad)
    assert b.grad is None


class SplitTwo(Function):
    """Two outputs (the first and the rest of a vector), so one may go unused."""

    def forward(self, x):
        return x[:1] * 2, x[1:] * 3

    def backward(self, g1, g2):
        return lz.Variable(np.concatenate([g1.data * 2, g2.data * 3]), requires_grad=False)


def test_an_unused_output_gets_zeros_of_its_dtype():
    x = lz.Variable(np.array([1.0, 2.0, 3.0], dtype=np.float32))
    first, rest = SplitTwo()(x)
    del rest
    first.sum().backward()
    assert x.grad.dtype == np.float32
    np.testing.assert_array_equal(x.grad.data, [2.0, 0.0, 0.0])
    assert_constant(x.grad)


# ----- accumulation across passes ---------------------------------------------------------
def test_a_second_backward_adds_to_an_array_gradient():
    x = var(1.0, 2.0, 3.0)
    (x * x).sum().backward()
    (x * 3.0).sum().backward()
    np.testing.assert_allclose(x.grad.data, [5.0, 7.0, 9.0])
    x.cleargrad()
    (x * 2.0).sum().backward()
    np.testing.assert_allclose(x.grad.data, [2.0, 2.0, 2.0])


def test_create_graph_accumulation_stays_differentiable():
    x = var(2.0)
    (x * x * x).backward(create_graph=True)       # 3x^2 = 12
    first = x.grad
    (x * x).backward(create_graph=True)           # + 2x = 4
    assert x.grad is not first and x.grad.data[0] == 16.0
    np.testing.assert_array_equal(first.data, [12.0])    # the first total is not written
    (gg,) = grad(x.grad, [x])
    assert gg.data[0] == pytest.approx(14.0)      # 6x + 2


# ----- count_leaf_uses and hook timing ----------------------------------------------------
def test_count_leaf_uses_counts_recorded_uses_once_per_function():
    x, w, c = var(1.0), var(2.0), lz.Variable(np.array([3.0]), requires_grad=False)
    h = x * w                  # x, w used once here
    a = h * x                  # x again
    y = a + a * c + h          # h and a are shared: their Functions are counted once
    assert count_leaf_uses([y]) == {x: 2, w: 1}
    assert count_leaf_uses([x]) == {}
    assert count_leaf_uses([y, h]) == {x: 2, w: 1}


class Log(FunctionHook):
    def __init__(self, log):
        self.log = log

    def backward_preprocess(self, function, grad_outputs):
        self.log.append(type(function).__name__)


def test_a_leaf_hook_runs_at_its_last_use_before_earlier_functions():
    """The post-accumulate hook of ``w`` (used only by the last Function) runs before the
    backward of the Functions behind it: data parallelism starts communication there."""
    x, w = var(1.0, 2.0), var(3.0)
    log = []
    h = F.exp(x)
    y = (F.sin(h) * w).sum()
    handle = w.register_post_accumulate_grad_hook(lambda p: log.append("w done"))
    with Log(log):
        y.backward()
    handle.remove()
    assert log == ["Sum", "Mul", "w done", "Sin", "Exp"]
    np.testing.assert_allclose(w.grad.data, [np.sin(np.exp(1.0)) + np.sin(np.exp(2.0))])


# ----- the one-Function path: (a + b).backward() ------------------------------------------
def _grads_of(op, general, rounds=2):
    """Leaves' gradients after ``rounds`` backward passes of ``op(a, b)``; ``general``
    passes retain_grad, which sends the pass through the heap."""
    rng = np.random.default_rng(3)
    a, b = (lz.Variable(rng.standard_normal((3, 4)).astype(np.float32)) for _ in range(2))
    for _ in range(rounds):
        op(a, b).backward(retain_grad=general)
    return a.grad.data, b.grad.data


@pytest.mark.parametrize("op", [lambda a, b: a + b, lambda a, b: a * b, lambda a, b: a / b,
                                lambda a, b: a - b, lambda a, b: F.matmul(a, b.T)])
def test_the_one_function_path_gives_the_general_paths_gradients(op):
    for fast, general in zip(_grads_of(op, False), _grads_of(op, True)):
        np.testing.assert_array_equal(fast, general)


def test_one_function_on_leaves_skips_the_pass_bookkeeping(monkeypatch):
    engine = __import__("lezero.core.backward", fromlist=["_Pass"])
    a, b = var(1.0, 2.0), var(3.0, 4.0)
    y, z = a * b, a * b
    monkeypatch.setattr(engine, "_Pass", None)          # the general path would fail here
    y.backward()
    np.testing.assert_array_equal(a.grad.data, [3.0, 4.0])
    with pytest.raises(TypeError):                      # retain_grad needs the general path
        z.backward(retain_grad=True)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_one_element_gradients_accumulate_as_the_dtypes_own_sum(dtype):
    """A one-element .grad grows by fill(old + new) from Python numbers; rounding that
    float64 sum once gives the dtype's own sum, which this checks over many passes."""
    rng = np.random.default_rng(0)
    values = rng.standard_normal(200).astype(dtype) * dtype(1e3)
    x = lz.Variable(np.ones(1, dtype))
    expected = np.zeros(1, dtype)
    for v in values:
        (x * lz.Variable(np.array([v]), requires_grad=False)).backward()
        expected += np.array([v])
    assert x.grad.dtype == dtype
    np.testing.assert_array_equal(x.grad.data, expected)
