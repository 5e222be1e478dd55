"""Module's PyTorch manners: to/cuda/cpu/half/float/double, requires_grad_, apply,
named_modules, buffers, forward hooks (checked against torch.nn), and what __call__ does
with float64 data and Python lists (``lezero.nn.module_manners``)."""
import warnings

import numpy as np
import pytest
import torch

import lezero as lz
from lezero import nn
from lezero.nn import module_manners


def _pair():
    """The same small model in LeZero and in torch (same names, same weights)."""
    ours = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 2))
    theirs = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4),
                                 torch.nn.ReLU(), torch.nn.Linear(4, 2))
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    return ours, theirs


def test_dtype_methods_cast_floating_state_only_like_torch():
    ours, theirs = _pair()
    for method, dtype in (("half", np.float16), ("double", np.float64), ("float", np.float32)):
        assert getattr(ours, method)() is ours
        getattr(theirs, method)()
        got = {k: v.dtype for k, v in ours.state_dict().items()}
        want = {k: np.dtype(str(v.dtype).replace("torch.", "")) for k, v in
                theirs.state_dict().items()}
        assert got == want and got["1.num_batches_tracked"] == np.int64
        assert got["0.weight"] == dtype


def test_to_casts_parameters_and_their_gradients_in_place():
    m = nn.Linear(3, 2)
    w = m.weight
    m(np.ones((1, 3), np.float32)).sum().backward()
    assert m.to(np.float64) is m and m.weight is w      # the same Parameter object
    assert w.dtype == np.float64 and w.grad.dtype == np.float64
    assert m.to("cpu", "float32").weight.dtype == np.float32 and m.cpu() is m
    with pytest.raises(TypeError, match=r"Linear.to: a module can only be cast to a floating"):
        m.to(np.int32)
    with pytest.raises(TypeError, match=r"Linear.to: expected a device \('cpu', 'cuda', "
                       r"'cuda:N'\) or a dtype \(np.float32, 'float16', ...\), got str 'gpu:0'"):
        m.to("gpu:0")
    with pytest.raises(ValueError, match=r"Linear.to: device must be 'cpu', 'cuda' or"):
        m.to(device="cuda:x")


def test_requires_grad_freezes_every_parameter():
    ours, _ = _pair()
    assert ours.requires_grad_(False) is ours
    assert not any(p.requires_grad for p in ours.parameters())
    y = ours(np.ones((2, 3), np.float32))
    assert not y.requires_grad
    ours.requires_grad_()
    assert all(p.requires_grad for p in ours.parameters())
    with pytest.raises(TypeError, match="requires_grad_: requires_grad must be a bool"):
        ours.requires_grad_(1)


def test_apply_and_named_modules_visit_in_torchs_order():
    ours, theirs = _pair()
    seen_ours, seen_theirs = [], []
    ours.apply(lambda m: seen_ours.append(type(m).__name__))
    theirs.apply(lambda m: seen_theirs.append(type(m).__name__))
    assert seen_ours == seen_theirs
    assert [n for n, _ in ours.named_modules()] == [n for n, _ in theirs.named_modules()]
    assert [n for n, _ in ours.named_modules(prefix="net")] == \
        [n for n, _ in theirs.named_modules(prefix="net")]


def test_register_buffer_persistence_matches_torch():
    ours, theirs = nn.Module(), torch.nn.Module()
    for m, make in ((ours, np.zeros), (theirs, torch.zeros)):
        m.register_buffer("kept", make(2))
        m.register_buffer("scratch", make(2), persistent=False)
    assert list(ours.state_dict()) == list(theirs.state_dict()) == ["kept"]
    assert [n for n, _ in ours.named_buffers()] == [n for n, _ in theirs.named_buffers()]


def test_forward_hooks_replace_and_remove_like_torch():
    x = np.ones((1, 3), np.float32)
    results = {}
    for lib, mod in (("ours", nn.Linear(3, 2)), ("torch", torch.nn.Linear(3, 2))):
        calls = []
        pre = mod.register_forward_pre_hook(lambda m, args: (args[0] * 0,))
        post = mod.register_forward_hook(lambda m, args, out: calls.append(len(args)) or
                                         out * 0 + 7)
        inp = x if lib == "ours" else torch.tensor(x)
        first = np.asarray(mod(inp).detach())
        pre.remove()
        post.remove()
        second = np.asarray(mod(inp).detach())
        results[lib] = (first, calls, second.shape)
    assert np.array_equal(results["ours"][0], np.full((1, 2), 7, np.float32))
    assert np.array_equal(results["ours"][0], results["torch"][0])
    assert results["ours"][1:] == results["torch"][1:] == ([1], (1, 2))


def test_float64_input_is_cast_to_the_parameter_dtype_with_one_warning():
    module_manners._WARNED.clear()
    m = nn.Linear(6, 3)
    x = np.random.default_rng(0).random((4, 6))
    with pytest.warns(module_manners.DtypeWarning,
                      match=r"Linear: input 0 is float64 but the layer's parameters are float32"):
        y = m(x)
    assert y.dtype == np.float32
    y.sum().backward()
    assert m.weight.grad.dtype == np.float32
    # Another BLAS may sum the 6 products in another order: |error| <= 6 eps sum|terms|
    np.testing.assert_allclose(y.data, x.astype(np.float32) @ m.weight.data.T + m.bias.data,
                               rtol=1e-6, atol=1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # a second call does not warn again
        m(x)
        nn.Linear(6, 3)(x)


def test_a_float64_variable_input_keeps_its_gradient_in_float64():
    module_manners._WARNED.clear()
    m = nn.Linear(2, 1)
    x = lz.Variable(np.ones((1, 2)))
    with pytest.warns(module_manners.DtypeWarning):
        m(x).sum().backward()
    assert x.grad.dtype == np.float64
    np.testing.assert_allclose(x.grad.data, m.weight.data.astype(np.float64))


def test_a_float64_model_and_integer_inputs_are_left_alone():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = nn.Linear(2, 1).double()
        assert m(np.ones((1, 2))).dtype == np.float64
        assert nn.Embedding(5, 2)(np.array([1, 2])).dtype == np.float32
        assert nn.ReLU()(np.ones(2)).dtype == np.float64     # no parameters, no dtype


def test_a_python_list_of_numbers_is_converted_like_variable_does():
    m = nn.Linear(2, 3)
    y = m([[1.0, 2.0]])
    assert y.dtype == np.float32
    np.testing.assert_allclose(y.data, m(np.array([[1.0, 2.0]], np.float32)).data)
    assert nn.Embedding(5, 2)([1, 4]).shape == (2, 2)


def test_a_list_of_variables_is_passed_through_with_its_graph():
    class Joiner(nn.Module):
        def forward(self, xs):
            return lz.functions.concatenate(xs)

    a = lz.Variable(np.ones(2, np.float32))
    Joiner()([a, a]).sum().backward()
    np.testing.assert_allclose(a.grad.data, [2.0, 2.0])


def test_float_indices_into_an_embedding_model_get_its_own_error_and_no_cast_warning():
    class Tagger(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb, self.out = nn.Embedding(5, 2), nn.Linear(2, 3)

        def forward(self, ids):
            return self.out(self.emb(ids))

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(TypeError, match=r"Embedding: .*integer.*float64"):
            Tagger()(np.array([0.0, 1.0]))
        assert Tagger()(np.array([0, 1])).dtype == np.float32
