"""Linear algebra operators: gradients (float64 central differences), double backward,
PyTorch parity (float32), einsum's subscript forms, the fused linear Function, and the
errors for bad shapes and for singular / non-positive-definite matrices."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import lezero as lz
import lezero.functions as F
from tests.functions.shape.test_shape_and_indexing import check_op
from lezero.testing import check_torch, rand

T = torch


def _eye(a, scale):
    """scale * I in ``a``'s dtype, for making test matrices well conditioned."""
    return scale * lz.cuda.get_array_module(a).eye(a.shape[-1], dtype=a.dtype)


def _spd(a):
    """A symmetric positive-definite matrix from any square ``a`` (LeZero)."""
    return a @ F.swapaxes(a, -1, -2) + _eye(a, a.shape[-1])


def _tspd(a):
    return a @ a.mT + a.shape[-1] * T.eye(a.shape[-1])


# name, LeZero function, PyTorch function, input shapes
CASES = [
    ("matmul", F.matmul, T.matmul, [(2, 3), (3, 2)]),
    ("matmul_broadcast", F.matmul, T.matmul, [(2, 1, 2, 3), (3, 3, 2)]),
    ("matmul_vector", F.matmul, T.matmul, [(3,), (2, 3, 2)]),
    ("dot_vectors", F.dot, T.dot, [(3,), (3,)]),
    ("dot_matrices", F.dot, T.matmul, [(2, 3), (3, 2)]),
    ("dot_nd_vector", F.dot, lambda a, b: T.tensordot(a, b, ([-1], [0])), [(2, 2, 3), (3,)]),
    ("dot_nd_nd", F.dot, lambda a, b: T.tensordot(a, b, ([-1], [-2])), [(2, 3), (2, 3, 2)]),
    ("dot_scalar", F.dot, T.mul, [(), (2, 3)]),
    ("tensordot", F.tensordot, lambda a, b: T.tensordot(a, b, 2), [(2, 3, 2), (3, 2, 2)]),
    ("tensordot_pairs", lambda a, b: F.tensordot(a, b, ([0, 2], [2, 0])),
     lambda a, b: T.tensordot(a, b, ([0, 2], [2, 0])), [(2, 3, 2), (2, 3, 2)]),
    ("tensordot_permuted", lambda a, b: F.tensordot(a, b, ([1, 0], [2, 1])),
     lambda a, b: T.tensordot(a, b, ([1, 0], [2, 1])), [(2, 3, 2), (2, 2, 3)]),
    ("tensordot_matrices", lambda a, b: F.tensordot(a, b, ([0], [1])),
     lambda a, b: T.tensordot(a, b, ([0], [1])), [(3, 2), (2, 3)]),
    ("tensordot_outer", lambda a, b: F.tensordot(a, b, 0), lambda a, b: T.tensordot(a, b, 0),
     [(2,), (3,)]),
    ("outer", F.outer, T.outer, [(3,), (4,)]),
    ("linear", F.linear, TF.linear, [(4, 3), (2, 3), (2,)]),
    ("linear_batch_no_bias", F.linear, TF.linear, [(2, 2, 3), (2, 3)]),
    ("linear_1d", F.linear, TF.linear, [(3,), (2, 3), (2,)]),
    ("bilinear", F.bilinear, TF.bilinear, [(2, 3), (2, 2), (2, 3, 2), (2,)]),
    ("bilinear_batch", F.bilinear, TF.bilinear, [(2, 2, 2), (2, 2, 3), (2, 2, 3)]),
    ("inv", lambda a: F.inv(a + _eye(a, 3)), lambda a: T.linalg.inv(a + 3 * T.eye(3)),
     [(3, 3)]),
    ("inv_batched", lambda a: F.inv(a + _eye(a, 3)), lambda a: T.linalg.inv(a + 3 * T.eye(2)),
     [(3, 2, 2)]),
    ("det", F.det, T.linalg.det, [(3, 3)]),
    ("det_batched", F.det, T.linalg.det, [(2, 2, 2)]),
    ("solve_vector", lambda a, b: F.solve(a + _eye(a, 3), b),
     lambda a, b: T.linalg.solve(a + 3 * T.eye(3), b), [(3, 3), (3,)]),
    ("solve_broadcast", lambda a, b: F.solve(a + _eye(a, 3), b),
     lambda a, b: T.linalg.solve(a + 3 * T.eye(2), b), [(2, 2, 2), (2, 3)]),
    ("cholesky", lambda a: F.cholesky(_spd(a)), lambda a: T.linalg.cholesky(_tspd(a)), [(3, 3)]),
    ("cholesky_batched", lambda a: F.cholesky(_spd(a)), lambda a: T.linalg.cholesky(_tspd(a)),
     [(2, 2, 2)]),
]


@pytest.mark.parametrize("name,fn,torch_fn,shapes", CASES, ids=[c[0] for c in CASES])
def test_operator(name, fn, torch_fn, shapes):
    check_op(fn, torch_fn, *[rand(*s, seed=i) for i, s in enumerate(shapes)])


EINSUM = [
    ("ij,jk->ik", [(2, 3), (3, 2)]),
    ("ij,jk", [(2, 3), (3, 2)]),              # implicit output: ik
    ("ba", [(2, 3)]),                          # implicit: alphabetical, so a transpose
    ("ii->i", [(3, 3)]),
    ("ii", [(3, 3)]),                          # trace
    ("iij->j", [(2, 2, 3)]),
    ("i,i", [(3,), (3,)]),
    ("i,j->ij", [(2,), (3,)]),
    ("ij->", [(2, 3)]),
    ("ij->j", [(2, 3)]),
    ("bij,bjk->bik", [(2, 2, 3), (2, 3, 2)]),
    ("...ij,...jk->...ik", [(2, 1, 2, 3), (3, 3, 2)]),   # '...' broadcasts (2, 1) with (3,)
    ("...ii->...i", [(2, 3, 3)]),
    ("...i,...i", [(2, 3), (3,)]),
    ("ab, bc, cd -> ad", [(2, 2), (2, 3), (3, 2)]),
    ("i,->i", [(3,), ()]),
]


@pytest.mark.parametrize("subscripts,shapes", EINSUM, ids=[e[0] for e in EINSUM])
def test_einsum(subscripts, shapes):
    arrays = [rand(*s, seed=i) for i, s in enumerate(shapes)]
    check_op(lambda *xs: F.einsum(subscripts, *xs), lambda *xs: T.einsum(subscripts, *xs),
             *arrays)
    np.testing.assert_allclose(F.einsum(subscripts, *arrays).data,
                               np.einsum(subscripts, *arrays), rtol=1e-12)


@pytest.mark.parametrize("with_bias", [True, False])
@pytest.mark.parametrize("x_shape", [(3,), (4, 3), (2, 4, 3)])
def test_linear_first_order_arrays_equal_the_recorded_backward(x_shape, with_bias):
    """Plain backward computes linear's gradients as arrays; under create_graph the same
    gradients come from recorded operators (so they can be differentiated again)."""
    def grads(create_graph):
        x = lz.Variable(rand(*x_shape, dtype=np.float32, seed=1))
        w = lz.Variable(rand(5, 3, dtype=np.float32, seed=2))
        params = [x, w] + ([lz.Variable(rand(5, dtype=np.float32, seed=3))] if with_bias else [])
        y = F.linear(*params)
        y.backward(grad=lz.Variable(rand(*y.shape, dtype=np.float32, seed=4)),
                   create_graph=create_graph)
        assert all((p.grad.creator is not None) == create_graph for p in params[:2])
        return [p.grad.data for p in params]
    for a, b in zip(grads(False), grads(True)):
        assert a.shape == b.shape and a.dtype == b.dtype == np.float32
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


def test_linear_is_one_fused_function():
    x = lz.Variable(rand(2, 4, 3, dtype=np.float32, seed=1))
    w = lz.Variable(rand(5, 3, dtype=np.float32, seed=2))
    b = lz.Variable(rand(5, dtype=np.float32, seed=3))
    y = F.linear(x, w, b)
    assert type(y.creator).__name__ == "Linear" and y.creator.inputs == [x, w, b]
    assert y.dtype == np.float32 and y.shape == (2, 4, 5)
    y.backward()
    assert x.grad.dtype == w.grad.dtype == b.grad.dtype == np.float32
    np.testing.assert_allclose(b.grad.data, np.full(5, 8.0))
    np.testing.assert_allclose(w.grad.data, np.broadcast_to(x.data.sum((0, 1)), (5, 3)),
                               rtol=1e-6)
    x2 = lz.Variable(x.data)         # a constant weight gets no gradient, x still does
    F.linear(x2, w.data).sum().backward()
    np.testing.assert_allclose(x2.grad.data, np.broadcast_to(w.data.sum(0), (2, 4, 3)),
                               rtol=1e-6)


def test_det_and_solve_values():
    a = np.array([[2.0, 1.0], [1.0, 3.0]])
    assert F.det(a).item() == pytest.approx(5.0)
    np.testing.assert_allclose(F.solve(a, np.array([3.0, 5.0])).data, [0.8, 1.4])
    np.testing.assert_allclose((F.cholesky(a) @ F.cholesky(a).T).data, a)
    np.testing.assert_allclose(F.inv(a).data @ a, np.eye(2), atol=1e-12)


@pytest.mark.parametrize("fn,torch_fn", [
    (lambda a: F.linear(a, a[:2]), lambda a: TF.linear(a, a[:2])),
    (lambda a: F.einsum("ij,kj->ik", a, a), lambda a: T.einsum("ij,kj->ik", a, a)),
    (lambda a: F.inv(a + _eye(a, 3)), lambda a: T.linalg.inv(a + 3 * T.eye(3))),
    (lambda a: F.cholesky(_spd(a)), lambda a: T.linalg.cholesky(_tspd(a))),
], ids=["linear", "einsum", "inv", "cholesky"])
def test_backends(fn, torch_fn, xp):
    check_torch(fn, torch_fn, rand(3, 3, dtype=np.float32, seed=4), xp=xp)


A = lz.Variable(np.ones((2, 3), np.float32))
SQ = np.ones((3, 3))
SINGULAR = np.array([[1.0, 2.0], [2.0, 4.0]])

BAD = [
    (lambda: F.matmul(A, A), ValueError, "matmul: inner dimensions differ"),
    (lambda: F.dot(A, A), ValueError, r"dot: shapes \(2, 3\) and \(2, 3\) are not aligned"),
    (lambda: F.tensordot(A, A, 1), ValueError, "tensordot: axis 1 of a"),
    (lambda: F.tensordot(A, A, 3), ValueError, "tensordot: axes=3"),
    (lambda: F.tensordot(A, A, ([0], [0, 1])), ValueError, "tensordot: axes"),
    (lambda: F.tensordot(A, A, "x"), TypeError, "tensordot: axes must be"),
    (lambda: F.outer(A, [1.0]), TypeError, "outer: b must be"),
    (lambda: F.einsum("ij,jk", A), ValueError, "einsum: .* name 2 operands, got 1"),
    (lambda: F.einsum("i1", A), ValueError, "einsum: bad subscript"),
    (lambda: F.einsum("ijk", A), ValueError, "einsum: term 'ijk' does not fit"),
    (lambda: F.einsum("ij,ij", A, A.T), ValueError, "einsum: label 'i' has length 2"),
    (lambda: F.einsum("ij->k", A), ValueError, "einsum: output label 'k'"),
    (lambda: F.einsum("ij->ii", A), ValueError, "einsum: output subscripts 'ii'"),
    (lambda: F.einsum("ij->i->j", A), ValueError, "einsum: .* more than one '->'"),
    (lambda: F.einsum(3, A), TypeError, "einsum: subscripts must be a str"),
    (lambda: F.einsum("...i,...i", np.ones((2, 3)), np.ones((4, 3))), ValueError,
     "einsum: a '...' axis has length 2"),
    (lambda: F.linear(A, np.ones(3, np.float32)), ValueError, "linear: weight must be 2-D"),
    (lambda: F.linear(A, np.ones((4, 2), np.float32)), ValueError, "linear: x's last axis"),
    (lambda: F.linear(A, np.ones((4, 3), np.float32), np.ones(3, np.float32)), ValueError,
     r"linear: bias must have shape \(4,\)"),
    (lambda: F.linear(np.ones((2, 3), int), np.ones((4, 3))), TypeError,
     "linear: x must be floating point"),
    (lambda: F.bilinear(A, A, np.ones((2, 3, 3), np.float32)[0]), ValueError,
     "bilinear: weight must be 3-D"),
    (lambda: F.bilinear(A, A[:1], np.ones((2, 3, 3), np.float32)), ValueError,
     "bilinear: x1 .* must share batch axes"),
    (lambda: F.inv(A), ValueError, r"inv: a must be a square matrix .* got shape \(2, 3\)"),
    (lambda: F.inv(SINGULAR), ValueError, "inv: the matrix is singular"),
    (lambda: F.det(np.ones(3)), ValueError, "det: a must be a square matrix"),
    (lambda: F.det(lz.Variable(SINGULAR)).backward(), ValueError, "det: the gradient needs"),
    (lambda: F.solve(SINGULAR, np.ones(2)), ValueError, "solve: the matrix a is singular"),
    (lambda: F.solve(SQ, np.ones(2)), ValueError, r"solve: b of shape \(2,\)"),
    (lambda: F.solve(SQ, np.array(1.0)), ValueError, r"solve: b must be \(n,\) or .* 0-d"),
    (lambda: F.solve(SQ, np.ones((3, 2, 2))), ValueError, r"solve: b of shape \(3, 2, 2\)"),
    (lambda: F.solve(np.ones((2, 3, 3)), np.ones((3, 3, 1))), ValueError, "solve: b of shape"),
    (lambda: F.cholesky(-np.eye(2)), ValueError, "cholesky: the matrix is not positive "
                                                 "definite"),
    (lambda: F.cholesky(A), ValueError, "cholesky: a must be a square matrix"),
]


@pytest.mark.parametrize("call,error,message", BAD, ids=[b[2].split(":")[0] + str(i)
                                                         for i, b in enumerate(BAD)])
def test_bad_arguments_raise_named_errors(call, error, message):
    with pytest.raises(error, match=message):
        call()
