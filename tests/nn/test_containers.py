"""nn containers behave as torch.nn's: the same script of operations run on both gives
the same entries, names, lengths, membership, repr and errors.

Each script receives the library (lezero.nn or torch.nn) and returns the container; the
test compares a structural snapshot of both results, and that the same error type is
raised (or not) at the same step.
"""
import re
from collections import OrderedDict

import numpy as np
import pytest
import torch

from lezero import nn


def _leaf(lib, i):
    """A distinguishable module: Linear(i + 1, i + 2)."""
    return lib.Linear(i + 1, i + 2)


def _param(lib, i):
    data = np.full(i + 1, float(i), np.float32)
    return lib.Parameter(torch.tensor(data) if lib is torch.nn else data)


def _describe(entry):
    if hasattr(entry, "in_features"):
        return f"Linear({entry.in_features},{entry.out_features})"
    if hasattr(entry, "shape"):
        return f"P{tuple(entry.shape)}"
    return type(entry).__name__


def snapshot(container):
    """Everything that must agree: entries in order, their keys, len, repr, state keys."""
    entries = list(container.values()) if hasattr(container, "values") else list(container)
    # LeZero adds "# N params" comments and names dtypes as NumPy does; the rest is torch's.
    text = re.sub(r"  # [\d,]+ params", "", repr(container)).replace("torch.", "")
    text = text.replace("FloatTensor", "float32")
    return {"entries": [_describe(e) for e in entries], "len": len(container),
            "children": [n for n, _ in container.named_children()],
            "params": [n for n, _ in container.named_parameters()],
            "state": list(container.state_dict()), "repr": text}


SEQ = lambda lib: lib.Sequential(*[_leaf(lib, i) for i in range(4)])
LIST = lambda lib: lib.ModuleList([_leaf(lib, i) for i in range(4)])
PLIST = lambda lib: lib.ParameterList([_param(lib, i) for i in range(4)])

SCRIPTS = {
    "seq-negative-index": (SEQ, lambda lib, c: c[-1]),
    "seq-slice": (SEQ, lambda lib, c: c[1:3]),
    "seq-step-slice": (SEQ, lambda lib, c: c[::2]),
    "seq-append": (SEQ, lambda lib, c: c.append(_leaf(lib, 9))),
    "seq-insert-middle": (SEQ, lambda lib, c: (c.insert(1, _leaf(lib, 7)), c)[1]),
    "seq-insert-negative": (SEQ, lambda lib, c: (c.insert(-1, _leaf(lib, 7)), c)[1]),
    "seq-extend": (SEQ, lambda lib, c: c.extend([_leaf(lib, 5), _leaf(lib, 6)])),
    "seq-pop": (SEQ, lambda lib, c: (c.pop(1), c)[1]),
    "seq-del": (SEQ, lambda lib, c: (c.__delitem__(0), c)[1]),
    "seq-del-slice": (SEQ, lambda lib, c: (c.__delitem__(slice(1, 3)), c)[1]),
    "seq-setitem": (SEQ, lambda lib, c: (c.__setitem__(-2, _leaf(lib, 8)), c)[1]),
    "seq-add": (SEQ, lambda lib, c: c + lib.Sequential(_leaf(lib, 5))),
    "seq-iadd": (SEQ, lambda lib, c: c.__iadd__(lib.Sequential(_leaf(lib, 5)))),
    "seq-ordereddict": (lambda lib: lib.Sequential(OrderedDict(a=_leaf(lib, 0),
                                                               b=_leaf(lib, 1))),
                        lambda lib, c: c),
    "seq-ordereddict-slice": (lambda lib: lib.Sequential(OrderedDict(a=_leaf(lib, 0),
                                                                     b=_leaf(lib, 1))),
                              lambda lib, c: c[1:]),
    "seq-index-error": (SEQ, lambda lib, c: c[4]),
    "seq-float-index": (SEQ, lambda lib, c: c[1.0]),
    "list-index": (LIST, lambda lib, c: c[-4]),
    "list-slice": (LIST, lambda lib, c: c[2:]),
    "list-insert": (LIST, lambda lib, c: (c.insert(0, _leaf(lib, 7)), c)[1]),
    "list-pop": (LIST, lambda lib, c: (c.pop(0), c)[1]),
    "list-pop-index": (LIST, lambda lib, c: (c.pop(-3), c)[1]),
    "list-del": (LIST, lambda lib, c: (c.__delitem__(-1), c)[1]),
    "list-del-slice": (LIST, lambda lib, c: (c.__delitem__(slice(None, None, 2)), c)[1]),
    "list-extend": (LIST, lambda lib, c: c.extend([_leaf(lib, 5)])),
    "list-iadd": (LIST, lambda lib, c: c.__iadd__([_leaf(lib, 5)])),
    "list-add": (LIST, lambda lib, c: c + lib.ModuleList([_leaf(lib, 5)])),
    "list-setitem": (LIST, lambda lib, c: (c.__setitem__(0, _leaf(lib, 9)), c)[1]),
    "list-index-error": (LIST, lambda lib, c: c[-5]),
    "list-del-error": (LIST, lambda lib, c: c.__delitem__(4)),
    "list-str-index": (LIST, lambda lib, c: c["0"]),
    "plist-index": (PLIST, lambda lib, c: c[-1]),
    "plist-append": (PLIST, lambda lib, c: c.append(_param(lib, 6))),
    "plist-extend": (PLIST, lambda lib, c: c.extend([_param(lib, 6), _param(lib, 7)])),
    "plist-setitem": (PLIST, lambda lib, c: (c.__setitem__(1, _param(lib, 8)), c)[1]),
    "plist-index-error": (PLIST, lambda lib, c: c[9]),
}


def _run(lib, script):
    build, act = script
    try:
        return "ok", act(lib, build(lib))
    except Exception as e:         # noqa: BLE001 - the error kind is what is compared
        return type(e).__name__, None


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_list_containers_match_torch(name):
    ours, theirs = _run(nn, SCRIPTS[name]), _run(torch.nn, SCRIPTS[name])
    assert ours[0] == theirs[0], f"LeZero: {ours[0]}, torch: {theirs[0]}"
    if ours[0] == "ok":
        if isinstance(ours[1], CONTAINERS):
            assert snapshot(ours[1]) == snapshot(theirs[1])
        else:
            assert _describe(ours[1]) == _describe(theirs[1])


def test_membership_and_iteration_order():
    for lib in (nn, torch.nn):
        leaves = [_leaf(lib, i) for i in range(3)]
        for c in (lib.Sequential(*leaves), lib.ModuleList(leaves)):
            assert list(c) == leaves and leaves[1] in c and _leaf(lib, 1) not in c
        d = lib.ModuleDict({"b": leaves[0], "a": leaves[1]})
        assert list(d) == ["b", "a"] and "a" in d and "z" not in d
        assert list(d.values()) == leaves[:2]


DICT_SCRIPTS = {
    "mdict-order": lambda lib: lib.ModuleDict({"z": _leaf(lib, 0), "a": _leaf(lib, 1)}),
    "mdict-update-pairs": lambda lib: (lambda d: (d.update([("c", _leaf(lib, 2))]), d)[1])(
        lib.ModuleDict({"z": _leaf(lib, 0)})),
    "mdict-pop": lambda lib: (lambda d: (d.pop("z"), d)[1])(
        lib.ModuleDict({"z": _leaf(lib, 0), "a": _leaf(lib, 1)})),
    "mdict-del": lambda lib: (lambda d: (d.__delitem__("a"), d)[1])(
        lib.ModuleDict({"z": _leaf(lib, 0), "a": _leaf(lib, 1)})),
    "mdict-clear": lambda lib: (lambda d: (d.clear(), d)[1])(
        lib.ModuleDict({"z": _leaf(lib, 0)})),
    "mdict-missing": lambda lib: lib.ModuleDict({"z": _leaf(lib, 0)})["q"],
    "mdict-int-key": lambda lib: lib.ModuleDict({1: _leaf(lib, 0)}),
    "pdict-order": lambda lib: lib.ParameterDict({"w": _param(lib, 1), "b": _param(lib, 0)}),
    "pdict-pop": lambda lib: (lambda d: (d.pop("w"), d)[1])(
        lib.ParameterDict({"w": _param(lib, 1), "b": _param(lib, 0)})),
}

CONTAINERS = (nn.Sequential, nn.ModuleList, nn.ParameterList, torch.nn.Sequential,
              torch.nn.ModuleList, torch.nn.ParameterList)


@pytest.mark.parametrize("name", sorted(DICT_SCRIPTS))
def test_dict_containers_match_torch(name):
    outcome = {}
    for lib in (nn, torch.nn):
        try:
            outcome[lib] = ("ok", snapshot(DICT_SCRIPTS[name](lib)))
        except Exception as e:     # noqa: BLE001 - the error kind is what is compared
            outcome[lib] = (type(e).__name__, None)
    assert outcome[nn] == outcome[torch.nn]


def test_deliberate_differences_from_torch():
    # insert past the end appends, as list.insert does (torch stores the module under the
    # key "10", leaving a hole); a missing ParameterDict key is a KeyError, as in any
    # dict (torch raises AttributeError).  docs/nn.md lists both.
    c = nn.ModuleList([_leaf(nn, i) for i in range(4)])
    c.insert(10, _leaf(nn, 7))
    assert [n for n, _ in c.named_children()] == ["0", "1", "2", "3", "4"]
    with pytest.raises(KeyError):
        nn.ParameterDict({"w": _param(nn, 1)})["b"]


def test_sequential_runs_in_order_after_edits():
    seq = nn.Sequential(nn.Linear(2, 3), nn.ReLU())
    seq.insert(0, nn.Identity())
    seq.append(nn.Linear(3, 1))
    x = np.ones((4, 2), np.float32)
    assert seq(x).shape == (4, 1)
    assert [type(m).__name__ for m in seq] == ["Identity", "Linear", "ReLU", "Linear"]


def test_wrong_entry_kinds_are_type_errors_naming_the_container():
    with pytest.raises(TypeError, match="ModuleList: entries must be Modules, got int"):
        nn.ModuleList([1])
    with pytest.raises(TypeError, match="Sequential: entries must be Modules"):
        nn.Sequential(nn.ReLU()).append("relu")
    with pytest.raises(TypeError, match="ParameterList: entries must be Parameters, got ndarray"):
        nn.ParameterList([np.ones(2)])
