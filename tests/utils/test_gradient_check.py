"""gradient_check and check_double_backward fail whenever the gradient is wrong: NaN and
infinity on either side, one bad element in many, and double backward of linear ops."""
import numpy as np
import pytest

import lezero as lz
from lezero.utils import check_double_backward, gradient_check


class Shifted(lz.Function):
    """forward 2x + shift; backward returns what the test says (right or wrong)."""

    def __init__(self, shift, backward):
        self.shift, self._backward = shift, backward

    def forward(self, x):
        return 2 * x + self.shift

    def backward(self, gy):
        return self._backward(gy)


def test_issue_repro_nan_numeric_side_and_zero_backward_fails():
    # The repro from the issue: a NaN in the forward makes the numerical derivatives NaN
    # (the NaN output enters every central difference); a zero backward must not pass.
    f = lambda x: Shifted(np.array([np.nan, 0, 0]), lambda gy: gy * 0)(x)
    with pytest.raises(AssertionError, match=r"input 0 .*index \(0,\).*nan") as e:
        gradient_check(f, np.ones(3))
    assert "backward gives 0.0" in str(e.value)


class HalfLine(lz.Function):
    """x for x >= 0, ``outside`` below: at x = 0 only the step down leaves the line, so
    the central difference is non-finite at that element alone.  ``slope_at_0`` is the
    backward's value there."""

    def __init__(self, outside, slope_at_0, extra=0.0):
        self.outside, self.slope_at_0, self.extra = outside, slope_at_0, extra

    def forward(self, x):
        return np.where(x >= 0, x, self.outside)

    def backward(self, gy):
        x = self.inputs[0].data
        slope = np.where(x == 0, self.slope_at_0, 1.0) + self.extra
        return gy * lz.Variable(slope, requires_grad=False)


AT_ZERO = np.array([0.0, 0.5, 2.0])


def test_both_sides_nan_fails_unless_nan_ok():
    f = lambda x: HalfLine(np.nan, np.nan)(x)
    with pytest.raises(AssertionError, match=r"index \(0,\).*non-finite"):
        gradient_check(f, AT_ZERO)
    assert gradient_check(f, AT_ZERO, nan_ok=True)


def test_nan_ok_still_catches_a_mismatch_elsewhere():
    f = lambda x: HalfLine(np.nan, np.nan, extra=np.array([0, 0, 1e-2]))(x)
    with pytest.raises(AssertionError, match=r"index \(2,\)"):
        gradient_check(f, AT_ZERO, nan_ok=True)


def test_nan_on_one_side_only_fails_even_with_nan_ok():
    with pytest.raises(AssertionError, match=r"index \(0,\): backward gives -?[0-9.]+, central differences give nan"):
        gradient_check(lambda x: HalfLine(np.nan, 1.0)(x), AT_ZERO, nan_ok=True)


def test_infinite_analytic_side_fails():
    inf = lz.Variable(np.array([0.0, np.inf, 0.0]), requires_grad=False)
    f = lambda x: Shifted(0.0, lambda gy: gy * 2 + inf)(x)
    with pytest.raises(AssertionError, match=r"index \(1,\).*backward gives inf"):
        gradient_check(f, np.ones(3))


def test_infinite_numeric_side_fails():
    with pytest.raises(AssertionError, match=r"index \(0,\).*central differences give -inf"):
        gradient_check(lambda x: HalfLine(np.inf, 1.0)(x), AT_ZERO)


def test_one_wrong_element_of_a_large_input_is_named():
    n, bad = 2000, 1234
    delta = np.zeros(n)
    delta[bad] = 1e-3
    f = lambda x: Shifted(0.0, lambda gy: gy * 2 + lz.Variable(delta, requires_grad=False))(x)
    with pytest.raises(AssertionError, match=rf"index \({bad},\)"):
        gradient_check(f, np.linspace(-1, 1, n))


def test_a_right_gradient_passes():
    assert gradient_check(lambda x: Shifted(1.0, lambda gy: gy * 2)(x), np.ones(5))


def test_double_backward_of_a_linear_op_is_not_vacuous():
    # backward built from raw arrays is correct to first order but not differentiable:
    # the graph through the upstream gradient is cut.  The check must see that.
    cut = lambda gy: lz.Variable(2 * gy.data, requires_grad=False)
    f = lambda x: Shifted(0.0, cut)(x)
    assert gradient_check(f, np.ones(4))
    with pytest.raises(AssertionError, match="gradient_check"):
        check_double_backward(f, np.ones(4))
    assert check_double_backward(lambda x: Shifted(0.0, lambda gy: gy * 2)(x), np.ones(4))


def test_double_backward_catches_a_wrong_second_derivative():
    class Cube(lz.Function):
        def forward(self, x):
            return x ** 3

        def backward(self, gy):
            (x,) = self.inputs
            return gy * 3 * x * x

    assert check_double_backward(lambda x: Cube()(x), np.array([0.5, 1.5, -2.0]))

    class BadCube(Cube):
        def backward(self, gy):
            (x,) = self.inputs
            return gy * 3 * lz.Variable(x.data ** 2, requires_grad=False)   # x detached
    with pytest.raises(AssertionError):
        check_double_backward(lambda x: BadCube()(x), np.array([0.5, 1.5, -2.0]))
