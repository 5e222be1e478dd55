"""The cast policy table: printable, keyed by real Function classes, overridable, declarable."""
import numpy as np
import pytest

import lezero as lz
import lezero.functions as F
from lezero import amp
from lezero.amp.policy import _TABLE


def _function_classes():
    import lezero.nn  # noqa: F401  (every operator module loaded)
    stack, names = list(lz.Function.__subclasses__()), set()
    while stack:
        c = stack.pop()
        names.add(c.__name__)
        stack.extend(c.__subclasses__())
    return names


def test_every_table_entry_names_a_function_class():
    missing = set(_TABLE) - _function_classes()
    assert not missing, f"cast policy rows for classes that do not exist: {missing}"


@pytest.mark.parametrize("make, name, treatment", [
    (lambda x, w: F.linear(x, w), "Linear", "lower"),
    (lambda x, w: F.matmul(x, w.T), "MatMul", "lower"),
    (lambda x, w: F.einsum("ij,kj->ik", x, w), "Einsum", "lower"),
    (lambda x, w: F.tensordot(x, w, axes=([1], [1])), "Tensordot", "lower"),
    (lambda x, w: F.softmax(x, axis=1), "Softmax", "float32"),
    (lambda x, w: F.log_softmax(x, axis=1), "LogSoftmax", "float32"),
    (lambda x, w: F.exp(x), "Exp", "float32"),
    (lambda x, w: F.sum(x), "Sum", "float32"),
    (lambda x, w: F.mean(x), "Mean", "float32_compute"),
    (lambda x, w: F.layer_norm(x, (3,)), "Normalize", "float32_compute"),
    (lambda x, w: F.concatenate([x, w]), "Concatenate", "widest"),
    (lambda x, w: x + w[:2], "Add", "widest"),
    (lambda x, w: F.relu(x), "ReLU", "passthrough"),
])
def test_operators_map_to_the_documented_treatment(make, name, treatment):
    rng = np.random.default_rng(0)
    x = lz.Variable(rng.standard_normal((2, 3)).astype(np.float32))
    w = lz.Variable(rng.standard_normal((4, 3)).astype(np.float32))
    y = make(x, w)
    assert type(y.creator).__name__ == name
    assert amp.policy(name) == treatment == amp.cast_policy[type(y.creator)]


def test_the_table_prints_and_renders_as_markdown():
    text = str(amp.policy())
    assert "MatMul" in text and "lower" in text and "passthrough" in text
    assert repr(amp.cast_policy) == text
    md = amp.cast_policy.markdown()
    assert md.startswith("| Function | treatment |") and "| `Softmax` | float32 |" in md


def test_a_user_override_changes_one_operator_and_reset_restores_it():
    x = lz.Variable(np.ones((2, 3), np.float32))
    try:
        amp.cast_policy["Softmax"] = "lower"
        with amp.autocast():
            assert F.softmax(x, axis=1).dtype == np.float16
        assert amp.cast_policy.lookup(type(F.softmax(x).creator)) == ("lower", "user override")
        assert "lower*" in str(amp.cast_policy)
    finally:
        amp.cast_policy.reset("Softmax")
    with amp.autocast():
        assert F.softmax(x, axis=1).dtype == np.float32


def test_bad_overrides_are_clear_errors():
    with pytest.raises(ValueError, match="treatment must be one of 'lower'"):
        amp.cast_policy["Softmax"] = "half"
    with pytest.raises(TypeError, match="operator must be a Function class or its name"):
        amp.cast_policy[3] = "lower"
    with pytest.raises(ValueError, match="custom_fwd: cast_inputs must be one of"):
        amp.custom_fwd(cast_inputs="int8")


class MySquare(lz.Function):
    def forward(self, x):
        return x * x

    def backward(self, gy):
        return 2 * gy * self.inputs[0]


def test_custom_functions_declare_their_treatment():
    @amp.custom_fwd(cast_inputs="float32")
    class Up(MySquare):
        pass

    class Down(MySquare):
        autocast_policy = "lower"

    x = lz.Variable(np.ones(3, np.float16))
    y = lz.Variable(np.ones(3, np.float32))
    with amp.autocast():
        assert Up()(x).dtype == np.float32
        assert Down()(y).dtype == np.float16
        assert MySquare()(x).dtype == np.float16        # not in the table: passthrough
    assert amp.cast_policy.lookup(Up) == ("float32", "class attribute")
    assert amp.cast_policy.lookup(MySquare) == ("passthrough", "default (not in the table)")
    Down()(y).backward()
    assert y.grad.dtype == np.float32


def test_custom_bwd_runs_backward_under_the_forward_region():
    seen = []

    @amp.custom_bwd
    class Probe(MySquare):
        def backward(self, gy):
            seen.append(amp.is_autocast_enabled())
            return super().backward(gy)

    x = lz.Variable(np.ones(3, np.float32))
    with amp.autocast():
        a, b = Probe()(x), MySquare()(x)
    a.sum().backward()
    assert seen == [True]
