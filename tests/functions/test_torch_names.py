"""PyTorch's axis keywords (``dim=``, ``keepdim=``...) on every registered operator.

Driven by the registry and by the operator contract's one valid call per operator
(``CALLS``), so an operator added later with an ``axis`` parameter is covered too.
"""
import inspect

import numpy as np
import pytest
import torch

import lezero as lz
import lezero.functions as F
from lezero.functions import registry
from lezero.functions.torch_names import TORCH_NAMES, aliases_for
from tests.functions.test_operator_contract import CALLS, Case, _fill, _outputs

AXIS_OPS = sorted(op.name for op in registry.operators()
                  if "axis" in inspect.signature(op.fn).parameters)
KEEPDIMS_OPS = sorted(op.name for op in registry.operators()
                      if "keepdims" in inspect.signature(op.fn).parameters)


def test_the_walk_finds_the_axis_operators():
    assert {"sum", "mean", "max", "softmax", "log_softmax", "concatenate", "stack", "gather",
            "cumsum", "squeeze", "expand_dims", "normalize", "topk"} <= set(AXIS_OPS)
    assert {"sum", "mean", "max", "min", "var", "std", "logsumexp"} <= set(KEEPDIMS_OPS)


def _bound_call(name):
    """The contract's call for ``name`` with its arrays filled, as bound arguments."""
    case = Case(name)
    values = iter(case.arrays(np.float64))
    args = _fill(case.call.args, values)
    kwargs = dict(zip(case.call.kwargs, _fill(tuple(case.call.kwargs.values()), values)))
    bound = inspect.signature(case.info.fn).bind(*args, **kwargs)
    bound.apply_defaults()
    return case.info.fn, dict(bound.arguments)


def _same(a, b):
    a, b = _outputs(a) or [a], _outputs(b) or [b]
    assert len(a) == len(b)
    for u, v in zip(a, b):
        np.testing.assert_array_equal(getattr(u, "data", u), getattr(v, "data", v))


def _with_alias(name, numpy_name, torch_name, value):
    fn, arguments = _bound_call(name)
    if value is not None:
        arguments[numpy_name] = value
    lz.manual_seed(0)                   # gumbel_softmax draws noise
    reference = fn(**arguments)
    arguments[torch_name] = arguments.pop(numpy_name)
    lz.manual_seed(0)
    _same(fn(**arguments), reference)


@pytest.mark.parametrize("name", AXIS_OPS)
def test_every_axis_operator_accepts_dim(name):
    assert name in CALLS
    fn, arguments = _bound_call(name)
    try:        # a non-default axis where the call allows one, so the keyword matters
        fn(**{**arguments, "axis": 0})
        value = 0
    except (ValueError, TypeError):
        value = None
    _with_alias(name, "axis", "dim", value)


@pytest.mark.parametrize("name", KEEPDIMS_OPS)
def test_every_keepdims_operator_accepts_keepdim(name):
    _with_alias(name, "keepdims", "keepdim", True)


@pytest.mark.parametrize("name", AXIS_OPS)
def test_axis_and_dim_together_is_a_type_error_naming_the_operator(name):
    fn = registry.REGISTRY[name].fn
    with pytest.raises(TypeError, match=rf"^{name}: got both axis= and dim="):
        fn(lz.Variable(np.zeros((2, 2))), axis=0, dim=0)
    params = list(inspect.signature(fn).parameters)
    positional = [None] * (params.index("axis") + 1)
    with pytest.raises(TypeError, match=rf"^{name}: got both axis= and dim="):
        fn(*positional, dim=0)          # axis given by position, dim by keyword


def test_aliases_follow_the_signature():
    def op(x, axis=None, keepdims=False):
        return x
    assert set(aliases_for(op)) == {"dim", "keepdim", "dims"}
    def torchy(x, dim=None):
        return x
    assert aliases_for(torchy) == {}          # already PyTorch's name: nothing added
    assert set(TORCH_NAMES["dims"]) == {"axes", "axis"}


def test_an_operator_without_an_axis_is_not_wrapped():
    assert not hasattr(F.relu, "torch_aliases")
    with pytest.raises(TypeError):
        F.relu(lz.Variable(np.zeros(2)), dim=0)


def test_variable_methods_and_the_other_torch_spellings_match_torch():
    a = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    x, t = lz.Variable(a), torch.tensor(a)
    pairs = [
        (F.softmax(x, dim=1), torch.softmax(t, dim=1)),
        (x.sum(dim=1, keepdim=True), t.sum(dim=1, keepdim=True)),
        (x.mean(dim=(0, 2)), t.mean(dim=(0, 2))),
        (x.logsumexp(dim=2), t.logsumexp(dim=2)),
        (F.log_softmax(x, dim=0), torch.log_softmax(t, dim=0)),
        (F.flatten(x, start_dim=1), torch.flatten(t, start_dim=1)),
        (F.swapaxes(x, dim0=0, dim1=2), torch.transpose(t, 0, 2)),
        (F.flip(x, dims=(0, 1)), torch.flip(t, dims=(0, 1))),
        (F.transpose(x, dims=(2, 0, 1)), t.permute(2, 0, 1)),
        (F.cumsum(x, dim=2), torch.cumsum(t, dim=2)),
        (x.max(dim=1, keepdim=True), t.amax(dim=1, keepdim=True)),
    ]
    for ours, theirs in pairs:
        np.testing.assert_allclose(ours.data, theirs.numpy(), rtol=1e-5, atol=1e-6)


def test_dim_keyword_gradient_matches_torch():
    a = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
    x, t = lz.Variable(a), torch.tensor(a, requires_grad=True)
    (F.softmax(x, dim=0) * lz.Variable(np.arange(12.0, dtype=np.float32).reshape(3, 4))
     ).sum().backward()
    (torch.softmax(t, dim=0) * torch.arange(12.0).reshape(3, 4)).sum().backward()
    np.testing.assert_allclose(x.grad.data, t.grad.numpy(), rtol=1e-5, atol=1e-6)
