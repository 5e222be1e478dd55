"""PyTorch's constructors (``lezero.creation``) and grad-mode switches (``lezero.grad_mode``),
checked against torch."""
import numpy as np
import pytest
import torch

import lezero as lz
import lezero.functions as F
from lezero.functions import registry


def _torch_dtype(t):
    return np.dtype(str(t.dtype).replace("torch.", ""))


def _same_as_torch(ours, theirs, exact=True):
    assert ours.shape == tuple(theirs.shape)
    assert ours.dtype == _torch_dtype(theirs), (ours.dtype, theirs.dtype)
    (np.testing.assert_array_equal if exact else np.testing.assert_allclose)(
        ours.data, theirs.numpy())


@pytest.mark.parametrize("data", [[1.5, 2.0], [1, 2], [True, False], 3.0, 7, [[1, 2], [3, 4]],
                                  np.array([1.0, 2.0]), np.array([1, 2], np.int32),
                                  np.array([1.0], np.float16)])
def test_tensor_gives_torchs_dtypes(data):
    _same_as_torch(lz.tensor(data), torch.tensor(data))


def test_tensor_copies_and_from_numpy_shares():
    a = np.zeros(3, np.float32)
    t, s = lz.tensor(a), lz.from_numpy(a)
    a[0] = 5
    assert t.data[0] == 0 and s.data[0] == 5 and s.data is a
    assert not t.requires_grad and not s.requires_grad
    v = lz.Variable(a) * 2
    c = lz.tensor(v)
    assert c.creator is None and np.array_equal(c.data, v.data)
    with pytest.raises(TypeError, match="from_numpy: array must be a NumPy array, got list"):
        lz.from_numpy([1.0])


def test_requires_grad_and_dtype_keywords():
    x = lz.tensor([1.0, 2.0], requires_grad=True)
    (x * x).sum().backward()
    np.testing.assert_allclose(x.grad.data, [2.0, 4.0])
    assert lz.tensor([1, 2], dtype="float64").dtype == np.float64
    assert lz.zeros(2, dtype=np.float16).dtype == np.float16
    with pytest.raises(TypeError, match="tensor: only floating tensors can require gradients"):
        lz.tensor([1, 2], requires_grad=True)
    with pytest.raises(TypeError, match="zeros: requires_grad must be a bool"):
        lz.zeros(2, requires_grad=1)
    with pytest.raises(TypeError, match="ones: expected a dtype"):
        lz.ones(2, dtype="float99")


def test_filled_constructors_match_torch():
    for name in ("zeros", "ones"):
        _same_as_torch(getattr(lz, name)(2, 3), getattr(torch, name)(2, 3))
        _same_as_torch(getattr(lz, name)((2, 3)), getattr(torch, name)((2, 3)))
    assert lz.empty(2, 3).shape == (2, 3) and lz.empty(2).dtype == np.float32
    for value in (3, 2.5, True):
        _same_as_torch(lz.full((2, 2), value), torch.full((2, 2), value))
    _same_as_torch(lz.full(3, 1.5), torch.full((3,), 1.5))
    base = lz.Variable(np.arange(6, dtype=np.float64).reshape(2, 3))
    tbase = torch.arange(6, dtype=torch.float64).reshape(2, 3)
    for name in ("zeros_like", "ones_like"):
        _same_as_torch(getattr(lz, name)(base), getattr(torch, name)(tbase))
    _same_as_torch(lz.full_like(base, 4), torch.full_like(tbase, 4))
    assert lz.empty_like(base).shape == (2, 3) and lz.empty_like(base).dtype == np.float64
    assert lz.zeros_like(base.data, dtype=np.float32).dtype == np.float32


@pytest.mark.parametrize("call,error,match", [
    (lambda: lz.zeros(-1), ValueError, r"zeros: size must be >= 0, got -1"),
    (lambda: lz.zeros(2.0), TypeError, r"zeros: size must be an int, got float 2.0"),
    (lambda: lz.full((2,), "x"), TypeError, r"full: fill_value must be a number"),
    (lambda: lz.zeros_like([1, 2]), TypeError, r"zeros_like: input must be a Variable or an"),
    (lambda: lz.randint(5), TypeError, r"randint: expected randint\(high, size\)"),
    (lambda: lz.randint(5, 5, (2,)), ValueError, r"randint: high must be greater than low"),
    (lambda: lz.rand(2, dtype=np.int64), TypeError, r"rand: dtype must be a floating dtype"),
    (lambda: lz.arange(0, 3, 0), ValueError, r"arange: step must be nonzero"),
    (lambda: lz.arange("3"), TypeError, r"arange: end must be a number"),
    (lambda: lz.linspace(0, 1, -2), ValueError, r"linspace: steps must be >= 0"),
])
def test_bad_arguments_name_the_constructor(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_random_constructors_use_the_process_generator():
    lz.manual_seed(3)
    a = (lz.rand(2, 3), lz.randn(4), lz.randint(10, (5,)), lz.randint(-3, 3, (2, 2)))
    lz.manual_seed(3)
    b = (lz.rand(2, 3), lz.randn(4), lz.randint(10, (5,)), lz.randint(-3, 3, (2, 2)))
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x.data, y.data)
    assert [x.dtype for x in a] == [np.float32, np.float32, np.int64, np.int64]
    assert 0 <= a[0].data.min() and a[0].data.max() < 1
    assert 0 <= a[2].data.min() and a[2].data.max() < 10 and a[3].data.min() >= -3
    assert lz.randn(3, dtype="float16").dtype == np.float16
    assert lz.randn(100_000).data.std() == pytest.approx(1.0, abs=0.02)


@pytest.mark.parametrize("args", [(5,), (2, 9), (1, 10, 3), (0.0, 1.0, 0.1), (0, 2.5),
                                  (5, 0, -1), (-1.0, 1.0, 0.25), (3, 3)])
def test_arange_matches_torch(args):
    _same_as_torch(lz.arange(*args), torch.arange(*args), exact=False)


@pytest.mark.parametrize("args", [(0, 1, 5), (-2, 3, 11), (1.0, 1.0, 3), (0, 1, 1), (0, 5, 0)])
def test_linspace_matches_torch(args):
    _same_as_torch(lz.linspace(*args), torch.linspace(*args), exact=False)


def test_cat_and_stack_are_the_differentiable_operators():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    x, t = lz.Variable(a), torch.tensor(a, requires_grad=True)
    ours = lz.cat([x, x * 2], dim=1).sum() + lz.stack([x, x], dim=0).sum()
    theirs = torch.cat([t, t * 2], dim=1).sum() + torch.stack([t, t], dim=0).sum()
    ours.backward()
    theirs.backward()
    np.testing.assert_allclose(ours.data, theirs.detach().numpy())
    np.testing.assert_allclose(x.grad.data, t.grad.numpy())
    assert lz.cat is F.concatenate and lz.stack is F.stack and F.cat is F.concatenate


def test_aliases_are_not_counted_as_operators():
    assert registry.ALIASES == {"cat": "concatenate", "clamp": "clip"} or \
        {"cat", "clamp"} <= set(registry.ALIASES)
    names = {op.name for op in registry.operators()}
    assert not set(registry.ALIASES) & names
    assert all(target in names for target in registry.ALIASES.values())
    assert F.clamp(lz.Variable(np.array([-2.0, 0.5, 2.0])), min=-1, max=1).data.tolist() == \
        [-1.0, 0.5, 1.0]


# ----- grad mode -----------------------------------------------------------------------

def _records():
    return (lz.Variable(np.ones(1)) * 2).requires_grad


def test_set_grad_enabled_as_a_function_a_block_and_a_decorator():
    assert lz.is_grad_enabled() and _records()
    lz.set_grad_enabled(False)
    try:
        assert not lz.is_grad_enabled() and not _records()
    finally:
        lz.set_grad_enabled(True)
    assert _records()
    with lz.set_grad_enabled(False):
        assert not _records()
        with lz.set_grad_enabled(True):
            assert _records()
        assert not _records()
    assert _records()

    @lz.set_grad_enabled(False)
    def frozen():
        return _records()
    assert lz.is_grad_enabled()                 # decorating does not switch
    assert frozen() is False and _records()
    with pytest.raises(TypeError, match="set_grad_enabled: mode must be a bool"):
        lz.set_grad_enabled("no")


def test_inference_mode_is_no_grad_under_torchs_name():
    with lz.inference_mode():
        assert not _records()
    with lz.inference_mode(False):
        assert _records()

    @lz.inference_mode
    def bare():
        return _records()

    @lz.inference_mode()
    def called():
        return _records()
    assert bare() is False and called() is False and _records()
