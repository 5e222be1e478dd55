"""The examples of docs/custom_ops.md: Functions written by users work with backward,
double backward, gradient_check and lz.grad."""
import numpy as np
import pytest
import torch

import lezero as lz
import lezero.functions as F
from lezero.testing import check_all


class Cube(lz.Function):
    def forward(self, x):
        return x ** 3

    def backward(self, gy):
        x, = self.inputs
        return gy * 3 * x ** 2


class ScaledAdd(lz.Function):
    def __init__(self, alpha):
        self.alpha = alpha

    def forward(self, a, b):
        return a + self.alpha * b

    def backward(self, gy):
        a, b = self.inputs
        ga = F.sum_to(gy, a.shape) if self.needs_input_grad[0] else None
        gb = F.sum_to(gy * self.alpha, b.shape) if self.needs_input_grad[1] else None
        return ga, gb


class SinCos(lz.Function):
    def forward(self, x):
        xp = lz.cuda.get_array_module(x)
        return xp.sin(x), xp.cos(x)

    def backward(self, g_sin, g_cos):
        x, = self.inputs
        return g_sin * F.cos(x) - g_cos * F.sin(x)


class CubeArrays(Cube):
    """The page's first-order example: ``Cube`` plus ``backward_arrays``."""

    def backward_arrays(self, gy):
        x = self.inputs[0].data
        return gy * 3 * x * x


def test_one_input():
    x = np.random.default_rng(0).uniform(-1, 1, (3, 4))
    check_all(lambda a: Cube()(a), lambda a: a ** 3, x)


def test_several_inputs_with_broadcasting():
    rng = np.random.default_rng(1)
    a, b = rng.uniform(-1, 1, (3, 4)), rng.uniform(-1, 1, (4,))
    check_all(lambda a, b: ScaledAdd(0.5)(a, b), lambda a, b: a + 0.5 * b, a, b)


def test_constant_inputs_are_skipped():
    a = lz.Variable(np.ones((2, 2)))
    y = ScaledAdd(2.0)(a, np.ones(2))
    assert y.creator.needs_input_grad == (True, False)
    y.sum().backward()
    np.testing.assert_array_equal(a.grad.data, np.ones((2, 2)))


def test_several_outputs_including_an_unused_one():
    x = np.random.default_rng(2).uniform(-2, 2, 5)
    check_all(lambda a: SinCos()(a), lambda a: (torch.sin(a), torch.cos(a)), x)
    v = lz.Variable(x.copy())
    s, _ = SinCos()(v)
    s.sum().backward()
    np.testing.assert_allclose(v.grad.data, np.cos(x))


def test_higher_order_through_a_custom_function():
    x = lz.Variable(np.array(2.0))
    (g1,) = lz.grad(Cube()(x), x, create_graph=True)
    (g2,) = lz.grad(g1, x, create_graph=True)
    (g3,) = lz.grad(g2, x)
    assert (g1.item(), g2.item(), g3.item()) == (12.0, 12.0, 6.0)


def test_a_first_order_backward_on_arrays():
    x = np.random.default_rng(4).uniform(-1, 1, (3, 4))
    check_all(lambda a: CubeArrays()(a), lambda a: a ** 3, x)     # both backwards checked
    v = lz.Variable(x.copy())
    (first,) = lz.grad(CubeArrays()(v).sum(), v)
    (graph,) = lz.grad(CubeArrays()(v).sum(), v, create_graph=True)
    np.testing.assert_allclose(first.data, graph.data, rtol=1e-15)
    assert first.creator is None and graph.creator is not None


def test_gradient_check_reports_the_worst_element():
    class WrongCube(Cube):
        def backward(self, gy):
            x, = self.inputs
            return gy * 2 * x ** 2          # wrong factor

    with pytest.raises(AssertionError, match=r"input 0 .* differs at index"):
        lz.utils.gradient_check(lambda a: WrongCube()(a), np.array([1.0, 2.0]))


def test_function_called_with_an_array_and_a_python_scalar():
    """A plain ndarray next to a Python number: the number takes the array's dtype."""
    class AddScalar(lz.Function):
        def forward(self, x, c):
            return x + c

        def backward(self, gy):
            return gy, None

    x = np.ones(3, np.float32)
    y = AddScalar()(x, 2.5)
    assert y.dtype == np.float32 and not y.requires_grad
    np.testing.assert_array_equal(y.data, [3.5, 3.5, 3.5])
