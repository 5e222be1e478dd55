"""The first-order contract and the per-pass leaf counting (issue 33).

* The engine, not the Function, chooses: a first-order pass calls ``backward_arrays`` (raw
  arrays in and out) where a Function has one, ``create_graph`` calls ``backward``; a
  Function with ``backward`` only works as before.  No Function in lezero reads
  ``enable_backprop`` in its backward any more.
* Leaf uses are counted only by a pass that reaches a leaf with post-accumulate hooks;
  such hooks still run once per backward, when the gradient is complete.
"""
import ast
import importlib
import pathlib

import numpy as np
import pytest

import lezero as lz
import lezero.functions as F
from lezero.core import Function, FunctionHook, grad
from tests.core.test_engine_contract import Log       # notes each backward Function's name

engine = importlib.import_module("lezero.core.backward")     # the module, not the function

LEZERO = pathlib.Path(lz.__file__).parent


def var(*values):
    return lz.Variable(np.array(values, dtype=np.float64))


class Cube(Function):
    """x ** 3 with both backwards; ``calls`` notes which ran and what it received."""

    def __init__(self, calls):
        self.calls = calls

    def forward(self, x):
        return x ** 3

    def backward(self, gy):
        self.calls.append(("backward", type(gy).__name__))
        x, = self.inputs
        return gy * 3 * x ** 2

    def backward_arrays(self, gy):
        self.calls.append(("backward_arrays", type(gy).__name__))
        return gy * 3 * self.inputs[0].data ** 2


class CubeVariablesOnly(Cube):
    backward_arrays = None


@pytest.mark.parametrize("extra", [False, True], ids=["one Function", "a graph"])
def test_first_order_calls_backward_arrays_with_arrays(extra):
    """Both engine paths: the one-Function path and the heap."""
    calls = []
    x = var(1.0, 2.0)
    y = Cube(calls)(x)
    (y * 1.0 if extra else y).backward()
    assert calls == [("backward_arrays", "ndarray")]
    np.testing.assert_array_equal(x.grad.data, [3.0, 12.0])
    assert x.grad.creator is None and not x.grad.requires_grad


def test_create_graph_calls_backward_with_variables_and_differentiates_again():
    calls = []
    x = var(1.0, 2.0)
    (gx,) = grad(Cube(calls)(x).sum(), [x], create_graph=True)
    assert calls == [("backward", "Variable")]
    np.testing.assert_array_equal(gx.data, [3.0, 12.0])
    (ggx,) = grad(gx.sum(), [x])               # 6x
    np.testing.assert_array_equal(ggx.data, [6.0, 12.0])


def test_a_function_with_backward_only_works_unchanged_and_agrees():
    calls = []
    x = var(0.5, -2.0)
    z = CubeVariablesOnly(calls)(x) * 2.0
    z.sum().backward()
    assert calls == [("backward", "Variable")]
    both = var(0.5, -2.0)
    (Cube([])(both) * 2.0).sum().backward()
    np.testing.assert_array_equal(x.grad.data, both.grad.data)
    (gx,) = grad(CubeVariablesOnly(calls)(x).sum(), [x], create_graph=True)
    np.testing.assert_array_equal(gx.data, [0.75, 12.0])


def test_function_hooks_see_variables_around_backward_arrays():
    seen = []

    class Spy(FunctionHook):
        def backward_preprocess(self, function, grad_outputs):
            seen.append(("pre", type(function).__name__, type(grad_outputs[0]).__name__))

        def backward_postprocess(self, function, grad_outputs):
            seen.append(("post", type(function).__name__))

    x = var(2.0)
    y = Cube([])(x)
    with Spy():
        y.backward()
    assert seen == [("pre", "Cube", "Variable"), ("post", "Cube")]


def test_a_wrong_backward_arrays_is_reported_by_its_name():
    class Bad(Cube):
        def backward_arrays(self, gy):
            return gy[:1]

    x = var(1.0, 2.0)
    with pytest.raises(ValueError, match=r"^Bad\.backward_arrays returned a gradient of "
                                         r"shape \(1,\) for an input of shape \(2,\)$"):
        Bad([])(x).backward()


def _backward_sources():
    """(file:line, source) of every ``backward`` / ``backward_arrays`` method in lezero."""
    for path in sorted(LEZERO.rglob("*.py")):
        text = path.read_text()
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, ast.FunctionDef) and item.name.startswith("backward"):
                        yield (f"{path.relative_to(LEZERO)}:{item.lineno}",
                               ast.get_source_segment(text, item))


def test_no_backward_in_lezero_reads_enable_backprop():
    """The engine chooses the first-order path; a backward that asked the config would
    be a second, hidden contract."""
    found = list(_backward_sources())
    assert len(found) > 100                       # the scan does see the operators
    readers = [where for where, source in found if "enable_backprop" in source]
    assert readers == []


# ----- leaf counting per pass ------------------------------------------------------------
@pytest.fixture
def walks(monkeypatch):
    """The number of leaf-use walks the engine starts (``_count_uses`` calls)."""
    calls = []
    original = engine._count_uses

    def counting(stack, seen, uses):
        calls.append(len(stack))
        return original(stack, seen, uses)
    monkeypatch.setattr(engine, "_count_uses", counting)
    return calls


def test_a_post_hook_on_an_unrelated_leaf_does_not_make_passes_count(walks):
    other = var(0.0)
    handle = other.register_post_accumulate_grad_hook(lambda p: None)
    plain = var(1.0).register_hook(lambda g: g)          # plain hooks never ask
    x, w = var(1.0, 2.0), var(3.0)
    (F.sin(F.exp(x)) * w).sum().backward()
    assert walks == []
    np.testing.assert_allclose(w.grad.data, [np.sin(np.e) + np.sin(np.exp(2.0))])
    handle.remove()
    plain.remove()


def test_a_reached_leaf_with_a_post_hook_makes_its_pass_count_once(walks):
    x, w = var(1.0, 2.0), var(3.0)
    done = []
    w.register_post_accumulate_grad_hook(lambda p: done.append(p.grad.data.copy()))
    for _ in range(2):
        (F.sin(F.exp(x)) * w).sum().backward()
    assert len(walks) == 2                               # one walk per pass
    total = np.sin(np.e) + np.sin(np.exp(2.0))
    np.testing.assert_allclose(np.concatenate(done), [total, 2 * total])
    x.cleargrad()
    (x * 2.0).sum().backward()                           # w is not reached: no walk
    assert len(walks) == 2


def test_post_hooks_run_once_with_the_complete_gradient_at_the_last_use():
    """``x`` is first reached from ``b * x``, which gave ``b`` its gradient just before
    (``b`` has no post hook and another use, already processed); ``x`` and ``c`` are used
    again behind ``exp``: each post hook runs once, after all of its leaf's uses."""
    x, b, c = var(2.0), var(3.0), var(5.0)
    log = []
    for leaf, name in ((x, "x"), (c, "c")):
        leaf.register_post_accumulate_grad_hook(
            lambda p, name=name: log.append((name, float(p.grad.data[0]))))
    y = (b * x + F.exp(x * c) * b).sum()
    with Log(log):
        y.backward()
    e = np.exp(10.0)
    assert log == ["Sum", "Add", "Mul", "Exp", "Mul", "Mul",
                   ("x", pytest.approx(3.0 + 15.0 * e)), ("c", pytest.approx(6.0 * e))]
    np.testing.assert_allclose(b.grad.data, [2.0 + e])


def test_the_one_function_path_runs_leaf_and_output_hooks():
    a, b = var(1.0, 2.0), var(3.0, 4.0)
    ran = []
    handles = [a.register_hook(lambda g: g * 10.0),
               b.register_post_accumulate_grad_hook(lambda p: ran.append(p.grad.data.copy()))]
    y = a * b
    handles.append(y.register_hook(lambda g: g * 2.0))   # a hook on the output: the heap
    y.backward()
    np.testing.assert_array_equal(a.grad.data, [60.0, 80.0])
    np.testing.assert_array_equal(ran[0], [2.0, 4.0])
    z = a * b                                            # no hook on z: the one-Function path
    z.backward()
    np.testing.assert_array_equal(a.grad.data, [90.0, 120.0])
    np.testing.assert_array_equal(ran[1], [3.0, 6.0])
    for h in handles:
        h.remove()
