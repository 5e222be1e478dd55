"""``torch.Tensor``'s methods on Variable (``lezero.functions.tensor_methods``)."""
import numpy as np
import pytest
import torch

import lezero as lz
from lezero import cuda
from lezero.testing import check_double_backward, check_gradient, check_torch

A = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)


def test_dtype_methods_cast_differentiably_and_grads_come_back_in_the_source_dtype():
    x = lz.Variable(A.astype(np.float64))
    for method, dtype in (("half", np.float16), ("float", np.float32), ("double", np.float64)):
        assert getattr(x, method)().dtype == dtype
    x32 = lz.Variable(A)
    assert x32.float() is x32 and x32.to(np.float32) is x32 and x32.to("cpu") is x32
    y = x.half()
    (y * y).sum().backward()
    assert x.grad.dtype == np.float64
    np.testing.assert_allclose(x.grad.data, 2 * A.astype(np.float16).astype(np.float64),
                               rtol=1e-3)


def test_to_takes_torch_forms():
    x = lz.Variable(A)
    assert x.to("float64").dtype == np.float64
    assert x.to("cpu", np.float16).dtype == np.float16
    assert x.to(dtype="float16", device="cpu").dtype == np.float16
    other = lz.Variable(np.zeros(2, np.float64))
    assert x.to(other).dtype == np.float64 and x.type_as(other).dtype == np.float64
    assert x.cpu() is x


@pytest.mark.parametrize("call,error,match", [
    (lambda x: x.to("tpu"), TypeError, r"Variable.to: expected a device .* or a dtype"),
    (lambda x: x.to(dtype="tpu"), TypeError, r"Variable.to: expected a dtype"),
    (lambda x: x.to("cuda:x"), ValueError, r"device must be 'cpu', 'cuda' or 'cuda:N'"),
    (lambda x: x.to("cpu", "float32", "x"), TypeError, r"at most a device and a dtype"),
    (lambda x: x.to(-1), ValueError, r"device must be >= 0"),
    (lambda x: x.type_as(np.zeros(2)), TypeError, r"type_as: other must be a Variable"),
    (lambda x: x.permute(), TypeError, r"permute: give the order"),
])
def test_bad_arguments_name_the_method(call, error, match):
    with pytest.raises(error, match=match):
        call(lz.Variable(A))


def test_shape_methods_match_torch():
    check_torch(lambda x: x.view(6, 4), lambda t: t.view(6, 4), A)
    check_torch(lambda x: x.view((4, -1)), lambda t: t.view((4, -1)), A)
    check_torch(lambda x: x.unsqueeze(1), lambda t: t.unsqueeze(1), A)
    check_torch(lambda x: x.unsqueeze(-1), lambda t: t.unsqueeze(-1), A)
    check_torch(lambda x: x.permute(2, 0, 1), lambda t: t.permute(2, 0, 1), A)
    check_torch(lambda x: x.permute((1, 2, 0)), lambda t: t.permute((1, 2, 0)), A)
    check_torch(lambda x: x.clamp(-0.5, 0.5), lambda t: t.clamp(-0.5, 0.5), A)
    check_torch(lambda x: x.clamp(min=0.1), lambda t: t.clamp(min=0.1), A)
    check_torch(lambda x: lz.functions.clamp(x, max=0.2), lambda t: torch.clamp(t, max=0.2), A)


def test_view_shares_data_like_torch():
    x = lz.Variable(A.copy())
    v = x.view(24)
    v.data[0] = 42.0
    assert x.data[0, 0, 0] == 42.0


def test_clone_is_a_differentiable_copy():
    x = lz.Variable(A.copy())
    c = x.clone()
    assert c.data is not x.data and not np.shares_memory(c.data, x.data)
    np.testing.assert_array_equal(c.data, A)
    c.data[...] = 0
    assert x.data[0, 0, 0] == A[0, 0, 0]
    check_torch(lambda v: v.clone() * 3, lambda t: t.clone() * 3, A)
    check_gradient(lambda v: v.clone() * v, A[0])
    check_double_backward(lambda v: v.clone() * v, A[0])


def test_size_stays_deZeros_count_a_plain_int():
    # A callable int subclass would give torch's x.size(d), but NumPy treats an int
    # subclass as int64 rather than a weak Python scalar: loss / x.size became float64.
    x = lz.Variable(A)
    assert type(x.size) is int and x.size == 24 == x.numel()
    assert x.shape[1] == torch.tensor(A).size(1)
    assert (lz.Variable(A) / x.size).dtype == np.float32


@pytest.mark.gpu
def test_to_cuda_and_back_is_differentiable():
    if not cuda.is_available():
        pytest.skip("no CUDA device")
    x = lz.Variable(A)
    y = x.cuda()
    assert y.device == "cuda:0" and x.device == "cpu" and y.cuda() is y
    (y.to("cpu", np.float64) * 2).sum().backward()
    assert x.grad.device == "cpu" and x.grad.dtype == np.float32
    np.testing.assert_allclose(x.grad.data, 2.0)
