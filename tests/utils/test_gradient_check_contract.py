"""The gradient checker's contract beyond NaN handling: defaults, input kinds, several
outputs, tolerances that scale with the value, unused inputs, messages, and options that
reach the inner check of check_double_backward.  Written to kill the mutants mutmut
found alive in lezero/utils/gradient_check.py (docs/testing.md)."""
import inspect
import re
import warnings

import numpy as np
import pytest

import lezero as lz
import lezero.functions as F
from lezero.utils import check_double_backward, gradient_check, numerical_grad


class Scaled(lz.Function):
    """forward ``k * x``; backward ``k * (1 + rel) * gy``: right when ``rel`` is 0."""

    def __init__(self, k, rel=0.0):
        self.k, self.rel = k, rel

    def forward(self, x):
        return self.k * x

    def backward(self, gy):
        return gy * (self.k * (1 + self.rel))


class Cube(lz.Function):
    """forward ``x**3``; backward ``3 x**2 * factor`` (x detached when ``detach``): right
    to first and second order only with factor 1 and detach False."""

    def __init__(self, factor=1.0, detach=False):
        self.factor, self.detach = factor, detach

    def forward(self, x):
        return x ** 3

    def backward(self, gy):
        (x,) = self.inputs
        x = lz.Variable(x.data, requires_grad=False) if self.detach else x
        return gy * 3 * x * x * self.factor


def defaults(fn):
    return {k: p.default for k, p in inspect.signature(fn).parameters.items()
            if p.default is not inspect.Parameter.empty}


def test_defaults_are_pinned():
    assert defaults(numerical_grad) == {"eps": 1e-6, "gys": None}
    assert defaults(gradient_check) == {"eps": 1e-6, "rtol": 1e-5, "atol": 1e-6, "gys": None,
                                        "seed": 0, "nan_ok": False}
    assert defaults(check_double_backward) == {"eps": 1e-6, "rtol": 1e-4, "atol": 1e-5,
                                               "seed": 0, "nan_ok": False}


def test_numerical_grad_works_in_float64_whatever_the_input_dtype():
    x = np.array([0.3, -1.2, 2.0], dtype=np.float32)
    (g,) = numerical_grad(lambda v: v ** 3, x)
    assert g.dtype == np.float64
    np.testing.assert_allclose(g, 3 * x.astype(np.float64) ** 2, rtol=1e-8)


def test_numerical_grad_of_several_outputs_weighs_each_by_its_gy():
    x = np.array([1.0, 2.0])
    f = lambda v: (v * 2, v ** 2)
    (g,) = numerical_grad(f, x, gys=[np.array([1.0, 1.0]), np.array([3.0, -1.0])])
    np.testing.assert_allclose(g, [2 + 3 * 2 * 1, 2 - 2 * 2], rtol=1e-8)
    (plain,) = numerical_grad(lambda v: (v * v).sum(), x)          # gys default to ones
    np.testing.assert_allclose(plain, 2 * x, rtol=1e-8)
    (arr,) = numerical_grad(lambda v: np.asarray(v.data) * 5.0, x)  # a plain array output
    np.testing.assert_allclose(arr, [5.0, 5.0], rtol=1e-8)


def test_gradient_check_takes_variables_and_float32_and_rejects_integers():
    x32 = np.array([0.5, 1.5], dtype=np.float32)
    assert gradient_check(lambda v: F.tanh(v), lz.Variable(x32))
    assert gradient_check(lambda v: v * v, x32)
    with pytest.raises(TypeError, match="gradient_check: input 1 must be floating point, got int64"):
        gradient_check(lambda a, b: a * b, np.ones(2), np.arange(2))


def test_gradient_check_of_several_outputs_checks_each():
    assert gradient_check(lambda v: (v * 2, v ** 2), np.array([1.0, -2.0]))
    with pytest.raises(AssertionError, match="index"):
        gradient_check(lambda v: (Scaled(2.0)(v), Scaled(3.0, rel=0.01)(v)), np.ones(3))


def test_the_tolerance_grows_with_the_gradient():
    x = np.ones(3)
    # relative error 1e-7 on a gradient of 1e4: inside rtol=1e-5 times |gradient|
    assert gradient_check(lambda v: Scaled(1e4, rel=1e-7)(v), x)
    with pytest.raises(AssertionError, match=r"rtol=1e-05, atol=1e-06"):
        gradient_check(lambda v: Scaled(1e4, rel=1e-3)(v), x)
    assert gradient_check(lambda v: Scaled(1e4, rel=1e-3)(v), x, rtol=1e-2)
    # atol alone decides for a zero gradient
    assert gradient_check(lambda v: Scaled(0.0)(v) + 1.0, x)


def test_an_unused_input_has_a_zero_gradient():
    assert gradient_check(lambda a, b: a * 2, np.ones(2), np.ones(3))
    assert gradient_check(lambda a, b: (a * b).sum() + 0 * a.sum(), np.ones(2), np.ones(2))


def test_non_finite_values_fail_without_runtime_warnings():
    class InfGrad(lz.Function):
        def forward(self, x):
            return x * 1.0

        def backward(self, gy):
            return gy * lz.Variable(np.array([np.inf, 1.0]))

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(AssertionError, match=r"non-finite value; pass nan_ok=True if expected"):
            gradient_check(lambda v: InfGrad()(v), np.ones(2))


def test_a_finite_mismatch_message_has_no_non_finite_note():
    with pytest.raises(AssertionError) as info:
        gradient_check(lambda v: Scaled(2.0, rel=0.1)(v), np.ones(2))
    message = str(info.value)
    assert message.startswith("gradient_check: input 0 (shape (2,)) differs at index (")
    assert "non-finite" not in message and ", central differences give " in message


def test_matching_infinities_pass_with_nan_ok_opposite_ones_do_not():
    class Inf(lz.Function):
        def __init__(self, sign):
            self.sign = sign

        def forward(self, x):
            return np.where(x > 0, x, 0.0)

        def backward(self, gy):
            return gy * lz.Variable(np.array([self.sign * np.inf, 1.0]))

    # central differences see a finite slope: one side infinite is a failure, nan_ok or not
    with pytest.raises(AssertionError):
        gradient_check(lambda v: Inf(1.0)(v), np.ones(2), nan_ok=True)


def test_double_backward_of_several_inputs_and_outputs():
    a, b = np.array([0.4, -0.7]), np.array([1.1, 0.2])
    assert check_double_backward(lambda x, y: (x * y * y, F.tanh(x)), a, b)


def test_double_backward_without_a_gradient_says_so():
    for f in (lambda v: lz.Variable(np.ones(2)),                  # a constant output
              lambda v: lz.Variable(np.ones(2)) * 2):
        with pytest.raises(AssertionError,
                           match=r"^check_double_backward: f has no gradient to differentiate$"):
            check_double_backward(f, np.ones(2))


def test_double_backward_passes_its_tolerances_and_nan_ok_on():
    f = lambda v: Cube(1 + 2e-4)(v)          # its second derivative is off by 2e-4
    x = np.array([2.0, 3.0])
    with pytest.raises(AssertionError, match=r"rtol=0.0001, atol=1e-05"):
        check_double_backward(f, x)
    assert check_double_backward(f, x, rtol=1e-2)
    assert check_double_backward(f, x, rtol=0.0, atol=1.0)

    class NanSecond(lz.Function):
        def forward(self, x):
            return x * x

        def backward(self, gy):
            return gy * lz.Variable(np.array([np.nan, 1.0])) * self.inputs[0]

    with pytest.raises(AssertionError):
        check_double_backward(lambda v: NanSecond()(v), np.ones(2))


def test_inputs_reach_f_as_float64_and_lists_are_accepted():
    seen = []

    def f(v):
        seen.append(v.dtype)
        return v * v

    assert gradient_check(f, np.array([0.5, 1.5], dtype=np.float32))
    assert set(seen) == {np.dtype(np.float64)}
    assert gradient_check(lambda v: v * v, [0.5, 1.5])


def test_eps_reaches_the_central_differences():
    x = np.array([0.3, 1.1])
    assert gradient_check(F.sin, x)
    with pytest.raises(AssertionError):            # a step of 0.5 is far from the slope
        gradient_check(F.sin, x, eps=0.5)
    assert check_double_backward(F.sin, x)
    with pytest.raises(AssertionError):
        check_double_backward(F.sin, x, eps=0.5)


def _message(check, f, x, **kw):
    with pytest.raises(AssertionError) as info:
        check(f, x, **kw)
    return str(info.value)


def test_the_random_weights_are_seeded_reproducibly_by_default():
    x = np.linspace(-1, 1, 5)
    f = lambda v: Scaled(2.0, rel=0.1)(v)
    first = _message(gradient_check, f, x)
    assert first == _message(gradient_check, f, x) == _message(gradient_check, f, x, seed=0)
    assert first != _message(gradient_check, f, x, seed=1)

    g = lambda v: Cube(1.1)(v)
    second = _message(check_double_backward, g, x + 2)
    assert second == _message(check_double_backward, g, x + 2, seed=0)
    assert second != _message(check_double_backward, g, x + 2, seed=1)


def test_message_format_for_finite_and_non_finite_values():
    finite = _message(gradient_check, lambda v: Scaled(2.0, rel=0.1)(v), np.ones(2))
    assert re.search(r"central differences give -?[0-9.e-]+ \(rtol=1e-05, atol=1e-06\)$", finite)

    class InfGrad(lz.Function):
        def forward(self, v):
            return v * 1.0

        def backward(self, gy):
            return gy * lz.Variable(np.array([np.inf, 1.0]))

    non_finite = _message(gradient_check, lambda v: InfGrad()(v), np.ones(2))
    assert re.search(r"give -?[0-9.e-]+ \(a non-finite value; pass nan_ok=True if expected\) "
                     r"\(rtol=1e-05, atol=1e-06\)$", non_finite)


def test_double_backward_of_an_output_without_grad_says_so():
    with pytest.raises(AssertionError,
                       match=r"^check_double_backward: f has no gradient to differentiate$"):
        check_double_backward(lambda v: lz.Variable(np.ones(2), requires_grad=False), np.ones(2))


def test_double_backward_counts_every_input_even_after_an_unused_one():
    a, b = np.array([0.5, 1.5]), np.array([1.2, -0.4])
    assert check_double_backward(lambda u, v: v ** 3, a, b)       # u unused: no gradient
    with pytest.raises(AssertionError):                           # u's term must count
        check_double_backward(lambda u, v: Cube(detach=True)(u) + v ** 3, a, b)


def test_double_backward_nan_ok_accepts_agreeing_nan_only_when_asked():
    class NanSquare(lz.Function):
        """x**2 whose derivative is NaN: NaN on both sides of the inner check everywhere."""

        def forward(self, v):
            return v * v

        def backward(self, gy):
            return gy * lz.Variable(np.full(2, np.nan)) * self.inputs[0]

    f = lambda v: NanSquare()(v)
    with pytest.raises(AssertionError, match="non-finite"):
        check_double_backward(f, np.ones(2))
    assert check_double_backward(f, np.ones(2), nan_ok=True)
