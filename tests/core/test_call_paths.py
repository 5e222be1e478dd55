"""``Function.call1`` / ``call2``: the calls of one or two Variables that skip
``__call__``'s argument tuple and checks (what ``x + y`` runs).  They must record exactly
what the general path records, and hand hooks and reused instances to ``__call__``."""
import numpy as np
import pytest

import lezero as lz
from lezero.core import Function, FunctionHook, no_grad


class Pair(Function):
    def forward(self, a, b):
        return a * b

    def backward(self, gy):
        a, b = self.inputs
        return gy * b, gy * a


class Triple(Function):
    def forward(self, a, b, c):
        return a * b + c

    def backward(self, gy):
        a, b, _ = self.inputs
        return gy * b, gy * a, gy


def var(value, requires_grad=True):
    return lz.Variable(np.array([value]), requires_grad=requires_grad)


def record(f, *inputs):
    y = f(*inputs)
    return (f.needs_input_grad, f.generation, [id(x) for x in f.inputs],
            [r() is y for r in f.outputs], y.generation, y.requires_grad, y.creator is f)


@pytest.mark.parametrize("needs", [(True, True), (True, False), (False, True), (False, False)])
def test_two_variables_record_what_the_general_path_records(needs):
    a = var(2.0, needs[0]) * 1.0            # generation 1 (or a constant)
    b = var(3.0, needs[1])
    fast = record(Pair(), a, b)
    # the general path: a third input, a constant zero, changes nothing recorded but its own
    general = record(Triple(), a, b, var(0.0, False))
    assert fast[0] == general[0][:2] and fast[1:2] == general[1:2]
    assert fast[2] == general[2][:2] and fast[3:] == general[3:]
    assert fast == record(Pair(), a, b)     # f(a, b) and f.call2(a, b) alike
    f = Pair()
    assert f.call2(a, b).data == 6.0 and f.needs_input_grad == fast[0]


def test_one_variable_records_and_differentiates():
    x = var(3.0)
    y = lz.functions.exp(x)
    assert y.creator.needs_input_grad == (True,) and y.generation == 1
    y.backward()
    np.testing.assert_allclose(x.grad.data, np.exp([3.0]))
    c = lz.functions.exp(var(1.0, False))
    assert c.creator is None and c.requires_grad is False


def test_no_grad_records_nothing():
    with no_grad():
        f = Pair()
        y = f.call2(var(2.0), var(3.0))
    assert y.creator is None and f.inputs == () and f.needs_input_grad == (False, False)


def test_hooks_see_calls_made_through_the_short_paths():
    class Seen(FunctionHook):
        def __init__(self):
            self.names = []

        def forward_preprocess(self, function, in_data):
            self.names.append(type(function).__name__)

    with Seen() as seen:
        var(1.0) + var(2.0)
        lz.functions.exp(var(1.0))
        Pair().call2(var(1.0), var(2.0))
    assert seen.names == ["Add", "Exp", "Pair"]


def test_a_reused_instance_is_refused_by_the_short_paths():
    f = Pair()
    f.call2(var(1.0), var(2.0))
    with pytest.raises(RuntimeError, match="^Pair: this Function instance was already called"):
        f.call2(var(1.0), var(2.0))
    g = lz.functions.exp(var(1.0)).creator
    with pytest.raises(RuntimeError, match="^Exp: this Function instance was already called"):
        g.call1(var(1.0))


def test_arithmetic_checks_shapes_as_numpy_computes():
    a, b = var(1.0) * np.ones((2, 3)), lz.Variable(np.arange(3.0))
    y = a + b                               # broadcasting Variables take the short path too
    y.sum().backward()
    np.testing.assert_array_equal(b.grad.data, [2.0, 2.0, 2.0])
    for op, name in ((lambda p, q: p + q, "add"), (lambda p, q: p - q, "sub"),
                     (lambda p, q: p * q, "mul"), (lambda p, q: p / q, "div")):
        with pytest.raises(ValueError, match=rf"^{name}: operands cannot be broadcast "
                                             r"together: x0 \(2, 3\), x1 \(2,\)$"):
            op(a, lz.Variable(np.ones(2)))
    with pytest.raises(TypeError, match=r"^add: x1 must be .* got dtype complex128$"):
        b + lz.Variable(np.ones(3, np.complex128))
    with pytest.raises(TypeError, match=r"^sub: x0 must be .* got dtype bool$"):
        lz.Variable(np.ones(3, bool)) - b


def test_a_value_error_of_the_operator_itself_is_raised_once_named_checks_pass():
    class Refuses(Function):
        calls = 0

        def forward(self, a, b):
            type(self).calls += 1
            raise ValueError("refused")

    from lezero.functions.math.arith import arith
    with pytest.raises(ValueError, match="^refused$"):
        arith(Refuses, "refuses", var(1.0), var(2.0))
    assert Refuses.calls == 2               # tried, checked, tried again: no other error
