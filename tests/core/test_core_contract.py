"""The core's small contracts: Variable hooks and their handles, FunctionHook callbacks,
``Function`` (needs_input_grad, generations, scalar inputs, repr, messages), the settings
(``register_setting``, the snapshot cache, ``test_mode``), ``as_array`` / ``as_variable``.
"""
import contextvars
import re

import numpy as np
import pytest

import lezero as lz
from lezero.core import (Config, Function, FunctionHook, as_array, as_variable, get_config,
                         grad, no_grad, register_setting)
from lezero.core import test_mode as eval_mode     # not collected as a test
from lezero.core import config as config_module


def var(*values, dtype=np.float64):
    return lz.Variable(np.array(values, dtype=dtype))


# ----- Variable hooks --------------------------------------------------------------------
def test_hook_handles_remove_once():
    x = var(1.0, 2.0)
    calls = []
    first = x.register_hook(lambda g: calls.append("first"))
    second = x.register_post_accumulate_grad_hook(lambda p: calls.append("post"))
    assert len(x._hooks) == len(x._post_hooks) == 1
    first.remove()
    first.remove()                           # a second remove changes nothing
    assert x._hooks == [] and len(x._post_hooks) == 1
    (x * 2.0).sum().backward()
    assert calls == ["post"]                 # the removed hook is not called
    second.remove()
    assert x._post_hooks == []
    (x * 2.0).sum().backward()
    assert calls == ["post"]


def test_a_hook_may_return_an_array_or_a_variable():
    x, y = var(1.0, 2.0), var(3.0)
    handles = [x.register_hook(lambda g: g.data * 10.0)]
    replacement = lz.Variable(np.array([7.0]), requires_grad=False)
    handles.append(y.register_hook(lambda g: replacement))
    (x * y).sum().backward()
    np.testing.assert_array_equal(x.grad.data, [30.0, 30.0])
    assert x.grad.creator is None and x.grad.requires_grad is False
    assert y.grad is replacement
    for handle in handles:
        handle.remove()


def test_hook_registration_errors():
    x = var(1.0)
    with pytest.raises(TypeError, match=r"^register_hook: expected a callable, got int$"):
        x.register_hook(3)
    y = x * 2.0
    with pytest.raises(ValueError, match=r"^register_post_accumulate_grad_hook: only leaf "
                                         r"Variables accumulate gradients$"):
        y.register_post_accumulate_grad_hook(print)


# ----- FunctionHook -------------------------------------------------------------------------
class Recorder(FunctionHook):
    def __init__(self):
        self.calls = []

    def transform_inputs(self, function, inputs):
        self.calls.append(("transform", function, len(inputs)))
        return inputs

    def forward_preprocess(self, function, in_data):
        self.calls.append(("forward pre", function, in_data))

    def forward_postprocess(self, function, in_data):
        self.calls.append(("forward post", function, in_data))

    def backward_preprocess(self, function, grad_outputs):
        self.calls.append(("backward pre", function, grad_outputs))

    def backward_postprocess(self, function, grad_outputs):
        self.calls.append(("backward post", function, grad_outputs))


def test_function_hook_callbacks_receive_the_function_and_its_data():
    x = var(1.0, 2.0)
    hook, in_backward = Recorder(), Recorder()
    with hook:
        y = x * 3.0
    with in_backward:
        y.backward(grad=np.array([1.0, -1.0]))
    f = y.creator
    assert [c[0] for c in hook.calls] == ["transform", "forward pre", "forward post"]
    assert all(c[1] is f for c in hook.calls)
    assert hook.calls[0][2] == 2
    for _, _, in_data in hook.calls[1:]:
        assert len(in_data) == 2 and in_data[0] is x.data
    mine = [c for c in in_backward.calls if c[1] is f]     # Mul's backward calls Functions
    assert [c[0] for c in mine] == ["backward pre", "backward post"]
    for _, _, gys in mine:
        assert len(gys) == 1
        np.testing.assert_array_equal(gys[0].data, [1.0, -1.0])


def test_a_function_hook_lets_exceptions_through():
    with pytest.raises(KeyError, match="inside"):
        with Recorder():
            raise KeyError("inside")
    assert get_config().function_hooks == ()


# ----- Function --------------------------------------------------------------------------
class Probe(Function):
    """Adds its inputs and remembers what ``forward`` saw."""

    def forward(self, *xs):
        self.seen = (tuple(self.needs_input_grad), tuple(x.dtype for x in xs))
        out = xs[0]
        for x in xs[1:]:
            out = out + x
        return out

    def backward(self, gy):
        return (gy,) * len(self.inputs)


def test_needs_input_grad_is_known_in_forward():
    x, c = var(1.0), lz.Variable(np.array([2.0]), requires_grad=False)
    f = Probe()
    f(x, c)
    assert f.seen[0] == (True, False)
    f = Probe()
    f(c, c)
    assert f.seen[0] == (False, False)              # nothing to record
    with no_grad():
        f = Probe()
        y = f(x, x)
    assert f.seen[0] == (False, False) and y.creator is None and not y.requires_grad


@pytest.mark.parametrize("inputs,dtypes", [
    (lambda: (var(1.0), 2.0), ("float64", "float64")),
    (lambda: (2.0, var(1.0)), ("float64", "float64")),    # the first array, wherever it is
    (lambda: (np.array([1, 2]), 2), ("int64", "int64")),
    (lambda: (var(1.0, dtype=np.float32), 2.0), ("float32", "float32")),
    (lambda: (2.0, 3.0), ("float32", "float32")),         # no array: Python floats' rule
])
def test_python_scalars_take_the_dtype_of_the_first_array(inputs, dtypes):
    f = Probe()
    f(*inputs())
    assert tuple(d.name for d in f.seen[1]) == dtypes


def test_a_bad_input_type_is_named():
    with pytest.raises(TypeError, match=r"^lezero operator got an input of type str; "
                                        r"expected a Variable, an ndarray or a Python "
                                        r"number$"):
        Probe()(var(1.0), "2")


def test_generations_count_the_depth_of_the_graph():
    x = var(1.0)
    assert x.generation == 0
    y = x * 2.0
    z = y * x
    w = z + x
    assert (y.generation, z.generation, w.generation) == (1, 2, 3)
    assert y.creator.generation == 0 and z.creator.generation == 1
    assert repr(z.creator) == "<Mul generation=1>"
    assert repr(w.creator) == "<Add generation=2>"


def test_the_base_class_messages():
    with pytest.raises(NotImplementedError, match=r"^Function\.forward is not implemented$"):
        Function()(var(1.0))

    class NoBackward(Function):
        def forward(self, x):
            return x * 2

    y = NoBackward()(var(1.0))
    with pytest.raises(NotImplementedError, match=r"^NoBackward\.backward is not implemented; "
                                                  r"this operator is not differentiable$"):
        y.backward()
    f = Probe()
    f(var(1.0))
    message = ("Probe: this Function instance was already called and is part of a graph; "
               "create a new instance for each call (Probe()(x), not op(x1); op(x2))")
    with pytest.raises(RuntimeError, match=f"^{re.escape(message)}$"):
        f(var(2.0))


def test_backward_count_mismatch_names_the_function():
    class Bad(Function):
        def forward(self, a, b):
            return a + b

        def backward(self, gy):
            return gy

    y = Bad()(var(1.0), var(2.0))
    with pytest.raises(ValueError, match=r"^Bad\.backward returned 1 gradients for 2 "
                                         r"inputs$"):
        y.backward()


# ----- the engine's messages -----------------------------------------------------------------
def test_engine_error_messages():
    x = var(1.0, 2.0)
    y = x * 2.0
    with pytest.raises(ValueError, match=r"^backward: got 2 grad_outputs for 1 outputs$"):
        lz.core.backward(y, grad_outputs=[np.ones(2), np.ones(2)])
    with pytest.raises(TypeError, match=r"^backward: outputs\[1\] must be a Variable, got "
                                        r"ndarray$"):
        lz.core.backward([y, np.ones(2)])
    c = lz.Variable(np.ones(2), requires_grad=False)
    with pytest.raises(ValueError, match=r"^backward: outputs\[0\] does not require grad "
                                         r"\(it was computed from constants only, or under "
                                         r"no_grad\)$"):
        (c * 2.0).backward()
    with pytest.raises(TypeError, match=r"^grad: inputs\[1\] must be a Variable, got list$"):
        grad(y, [x, [1.0]])
    z = var(3.0)
    with pytest.raises(ValueError, match=r"^grad: inputs\[1\] \(shape \(1,\)\) is not used to "
                                         r"compute the outputs; pass allow_unused=True to get "
                                         r"None for it$"):
        grad(y.sum(), [x, z])


def test_grad_builds_no_graph_and_keeps_intermediates_clean_by_default():
    x = var(2.0)
    h = x * x
    y = h * x
    (g,) = grad(y, [x], retain_graph=True)
    assert g.creator is None and g.requires_grad is False and g.data[0] == 12.0
    assert h.grad is None and y.grad is None and x.grad is None
    (g2,) = grad(y, [x], create_graph=True)
    assert g2.creator is not None


# ----- Variable, as_array, as_variable ----------------------------------------------------------
def test_variable_keeps_its_name_and_starts_at_generation_zero():
    v = lz.Variable(np.zeros(2), name="weight")
    assert v.name == "weight" and v.generation == 0 and v.creator is None
    assert v.grad is None and v.requires_grad is True


def test_unchain_backward_of_a_leaf_is_a_no_op():
    x = var(1.0)
    x.unchain_backward()
    assert x.creator is None
    y = x * 2.0
    z = y * 3.0
    z.unchain_backward()
    assert z.creator is not None and y.creator is None


def test_as_array_rules():
    assert as_array(2.5, like=np.array([1, 2])).dtype == np.float64
    assert as_array(2.5, like=np.array([1, 2])) == 2.5
    assert as_array(2, like=np.array([1.0], np.float32)).dtype == np.float32
    assert as_array(1.5).dtype == np.float32
    assert as_array(np.float64(1.5)).dtype == np.float64
    with pytest.raises(TypeError, match=r"^Variable: cannot convert list to an array \("):
        as_array([[1.0], [1.0, 2.0]])          # ragged
    with pytest.raises(TypeError, match=r"^Variable: data of dtype <U1 is not numeric \(got "
                                        r"list\)$"):
        as_array(["a"])


def test_as_variable_wraps_constants_and_passes_variables_through():
    v = var(1.0)
    assert as_variable(v) is v
    a = np.array([1.0, 2.0])
    c = as_variable(a)
    assert isinstance(c, lz.Variable) and c.data is a
    assert c.requires_grad is False and c.creator is None
    s = as_variable(1.5)
    assert s.dtype == np.float32 and s.data == 1.5 and s.requires_grad is False


# ----- settings --------------------------------------------------------------------------------
def test_test_mode_sets_train_to_false():
    with eval_mode():
        assert Config.train is False
        assert get_config().train is False
    assert Config.train is True


def test_entering_the_same_setting_reuses_one_snapshot():
    base = get_config()
    assert base.replace("train", False) is base.replace("train", False)
    assert base.replace("train", False) is not base
    hooks = (FunctionHook(),)
    assert base.replace("function_hooks", hooks) is not base.replace("function_hooks", hooks)
    snap = base.replace("train", False)
    assert snap.train is False and snap.enable_backprop == base.enable_backprop


def test_register_setting_adds_a_default_seen_by_new_and_old_snapshots():
    old = get_config()
    name = "_contract_test_setting"
    try:
        register_setting(name, 17)
        assert getattr(old, name) == 17               # a snapshot made before it
        assert contextvars.Context().run(lambda: getattr(get_config(), name)) == 17
        assert getattr(Config, name) == 17
    finally:
        config_module._DEFAULTS.pop(name, None)
        vars(config_module._default).pop(name, None)
