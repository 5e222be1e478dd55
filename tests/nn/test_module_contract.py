"""Module and container behaviour the mutation run found unpinned: defaults, error
messages naming the type, hook bookkeeping, moving arrays, zero_grad, repr layout and
load_state_dict's copy-and-cast (docs/testing.md lists the mutants)."""
import inspect

import numpy as np
import pytest

import lezero as lz
from lezero import nn


def small():
    m = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    m.register_buffer("steps", np.zeros(1))
    return m


def defaults(fn):
    return {k: p.default for k, p in inspect.signature(fn).parameters.items()
            if p.default is not inspect.Parameter.empty}


def test_defaults_of_module_methods():
    assert defaults(nn.Module.train) == {"mode": True}
    assert defaults(nn.Module.buffers) == {"recurse": True}
    assert defaults(nn.Module.load) == {"strict": True}
    assert defaults(nn.Module.named_modules) == {"prefix": "", "memo": None}
    assert defaults(nn.Module.zero_grad) == {"set_to_none": True}
    m = small()
    m.eval()
    m.train()
    assert all(x.training for x in m.modules())
    assert [n for n, _ in m.named_modules()][:2] == ["", "0"]
    inner = nn.Sequential(small())
    assert len(list(inner.buffers())) == 1


def test_load_is_strict_by_default(tmp_path):
    m = small()
    path = tmp_path / "m.npz"
    m.save(str(path))
    with pytest.raises(KeyError, match="missing keys"):
        nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1), nn.Linear(1, 1)).load(str(path))
    other = small()
    other.load(str(path))
    np.testing.assert_array_equal(other[0].weight.data, m[0].weight.data)


def test_zero_grad_keeps_zeroed_arrays_or_drops_them():
    m = nn.Linear(2, 2)
    m(lz.Variable(np.ones((1, 2), np.float32))).sum().backward()
    grad = m.weight.grad
    m.zero_grad(set_to_none=False)
    assert m.weight.grad is grad and not np.any(grad.data)
    m.bias.grad = None
    m.zero_grad(set_to_none=False)               # a missing gradient stays missing
    assert m.bias.grad is None
    m.zero_grad()
    assert m.weight.grad is None


def test_move_converts_parameters_gradients_and_buffers():
    m = small()
    m(lz.Variable(np.ones((1, 2), np.float32))).sum().backward()
    before_w, before_g = m[0].weight.data.copy(), m[0].weight.grad.data.copy()
    assert m._move(lambda a: a + 1) is m
    np.testing.assert_array_equal(m[0].weight.data, before_w + 1)
    np.testing.assert_array_equal(m[0].weight.grad.data, before_g + 1)
    np.testing.assert_array_equal(m.steps, [1.0])
    assert m.to_cpu() is m and type(m[0].weight.data) is np.ndarray


def test_hooks_get_their_arguments_and_each_handle_removes_its_own():
    m = nn.Linear(2, 2)
    calls = []
    h1 = m.register_forward_hook(lambda mod, args, out: calls.append(("h1", mod, args, out)))
    h2 = m.register_forward_hook(lambda mod, args, out: calls.append(("h2",)))
    m.register_forward_hook(lambda mod, args, out: calls.append(("h3",)))
    pre = m.register_forward_pre_hook(lambda mod, args: calls.append(("pre", mod, args)))
    x = lz.Variable(np.ones((1, 2), np.float32))
    y = m(x)
    assert [c[0] for c in calls] == ["pre", "h1", "h2", "h3"]
    assert calls[0][1] is m and calls[0][2] == (x,)
    assert calls[1][1] is m and calls[1][2] == (x,) and calls[1][3] is y
    h2.remove()
    pre.remove()
    calls.clear()
    m(x)
    assert [c[0] for c in calls] == ["h1", "h3"]
    h1.remove()
    h1.remove()                                   # removing twice is harmless
    with pytest.raises(TypeError, match="^hook must be callable, got int$"):
        m.register_forward_hook(3)


def test_a_pre_hook_can_replace_the_arguments():
    m = nn.Linear(2, 2, bias=False)
    m.register_forward_pre_hook(lambda mod, args: (args[0] * 0,))
    assert not np.any(m(lz.Variable(np.ones((1, 2), np.float32))).data)
    m2 = nn.Identity()
    m2.register_forward_pre_hook(lambda mod, args: lz.Variable(np.full(2, 7.0)))  # one value
    np.testing.assert_array_equal(m2(lz.Variable(np.ones(2))).data, [7.0, 7.0])


@pytest.mark.parametrize("make, error, message", [
    (lambda: nn.ModuleDict({1: nn.ReLU()}), TypeError, "^ModuleDict: keys must be strings, got int$"),
    (lambda: nn.ParameterDict({1.5: nn.Parameter(np.ones(1))}), TypeError,
     "^ParameterDict: keys must be strings, got float$"),
    (lambda: nn.Sequential(3), TypeError, "^Sequential: entries must be Modules, got int$"),
    (lambda: nn.ModuleList([nn.ReLU()])["a"], TypeError,
     "^ModuleList: indices must be integers or slices, got str$"),
    (lambda: nn.Module().add_module("a", 3), TypeError, "^add_module: 'a' must be a Module, got int$"),
    (lambda: nn.Module().register_parameter("w", 3), TypeError,
     "^register_parameter: 'w' must be a Parameter or None, got int$"),
    (lambda: nn.Module().register_buffer("b", "x"), TypeError,
     "^register_buffer: 'b' must be an array or None, got str$"),
    (lambda: nn.Module().train("yes"), TypeError, "^train: mode must be a bool, got str$"),
    (lambda: nn.Module()(1), NotImplementedError, r"^Module has no forward\(\)$"),
    (lambda: nn.Linear(1, 1).nope, AttributeError, "^'Linear' object has no attribute 'nope'$"),
])
def test_errors_name_the_type_they_got(make, error, message):
    with pytest.raises(error, match=message):
        make()


def test_list_positions_by_index_for_set_delete_and_insert():
    a, b, c = nn.ReLU(), nn.Tanh(), nn.Sigmoid()
    ml = nn.ModuleList([a, b])
    ml[-1] = c
    assert list(ml) == [a, c]
    ml.insert(-1, b)
    assert list(ml) == [a, b, c]
    del ml[-3]
    assert list(ml) == [b, c]
    assert ml.pop() is c and list(ml) == [b]
    for bad in (lambda: ml.__setitem__("0", a), lambda: ml.__delitem__(1.0),
                lambda: ml.insert("0", a)):
        with pytest.raises(TypeError, match="^ModuleList: indices must be integers"):
            bad()


def test_dict_get_and_pop():
    relu = nn.ReLU()
    md = nn.ModuleDict({"a": relu})
    assert md.get("a") is relu and md.get("b") is None and md.get("b", relu) is relu
    assert md.pop("a") is relu and "a" not in md
    pd = nn.ParameterDict()
    pd.update([("w", nn.Parameter(np.ones(2)))])
    assert list(pd.keys()) == ["w"]


def test_deleting_attributes_of_each_kind():
    m = nn.Linear(2, 2)
    m.sub = nn.ReLU()
    m.plain = 5
    m.register_buffer("b", np.ones(1))
    del m.bias, m.sub, m.plain, m.b
    assert [n for n, _ in m.named_parameters()] == ["weight"]
    assert list(m.named_children()) == [] and list(m.named_buffers()) == []
    assert not hasattr(m, "plain")
    with pytest.raises(AttributeError):
        del m.never_set


def test_a_child_shared_twice_is_listed_once():
    shared = nn.ReLU()
    m = nn.Module()
    m.a = shared
    m.b = shared
    m.c = nn.Tanh()
    assert [n for n, _ in m.named_children()] == ["a", "c"]


def test_repr_layout_indents_children_and_counts_parameters():
    m = nn.Sequential(nn.Linear(2, 3), nn.Sequential(nn.ReLU(), nn.Linear(3, 1)))
    lines = repr(m).split("\n")
    assert lines[0] == "Sequential(  # 13 params"
    assert lines[1].startswith("  (0): Linear(")
    assert lines[2] == "  (1): Sequential(  # 4 params"
    assert lines[3] == "    (0): ReLU()" and lines[4].startswith("    (1): Linear(")
    assert lines[5] == "  )" and lines[6] == ")"
    assert repr(nn.ReLU()) == "ReLU()"
    plist = nn.ParameterList([nn.Parameter(np.ones((2, 3), np.float32))])
    assert "(0): Parameter containing: [float32 of size 2x3]" in repr(plist)


def test_load_state_dict_casts_and_copies_values():
    m = nn.Linear(2, 2)
    state = {k: np.full(v.shape, 0.5, dtype=np.float64) for k, v in m.state_dict().items()}
    state["weight"] = lz.Variable(state["weight"])
    m.load_state_dict(state)
    assert m.weight.data.dtype == np.float32 and np.all(m.weight.data == 0.5)
    state["bias"][...] = 9.0                       # the checkpoint array is not shared
    assert np.all(m.bias.data == 0.5)
    m32 = nn.Linear(2, 2)
    src = {k: v.copy() for k, v in m32.state_dict().items()}
    m32.load_state_dict(src)
    src["bias"][...] = 9.0                         # even when no cast is needed
    assert not np.any(m32.bias.data == 9.0)
