"""The reduction family: central differences, double backward and PyTorch parity for every
operator, plus ties, zeros, large inputs and bad arguments."""
import math

import numpy as np
import pytest
import torch

import lezero as lz
import lezero.functions as F
from lezero.functions.registry import operators
from lezero.testing import check_all, check_gradient, check_torch, rand

AXES = [(None, False), (1, False), ((0, 2), True), (-1, True), ((2, 0), False)]


def _dims(axis, ndim):
    return tuple(range(ndim)) if axis is None else axis


def _tprod(t, axis, keepdim):
    """torch.prod over several dims (torch takes one at a time)."""
    dims = _dims(axis, t.ndim)
    for d in sorted((a % t.ndim for a in np.atleast_1d(dims)), reverse=True):
        t = t.prod(dim=d, keepdim=keepdim)
    return t


# name, torch reduction (t, axis, keepdim), input range
REDUCTIONS = [
    ("sum", lambda t, a, k: t.sum(dim=_dims(a, t.ndim), keepdim=k), (-2, 2)),
    ("mean", lambda t, a, k: t.mean(dim=_dims(a, t.ndim), keepdim=k), (-2, 2)),
    ("prod", _tprod, (0.5, 1.5)),
    ("max", lambda t, a, k: torch.amax(t, dim=_dims(a, t.ndim), keepdim=k), (-2, 2)),
    ("min", lambda t, a, k: torch.amin(t, dim=_dims(a, t.ndim), keepdim=k), (-2, 2)),
    ("var", lambda t, a, k: torch.var(t, dim=_dims(a, t.ndim), correction=0, keepdim=k),
     (-2, 2)),
    ("std", lambda t, a, k: torch.std(t, dim=_dims(a, t.ndim), correction=0, keepdim=k),
     (-2, 2)),
    ("logsumexp", lambda t, a, k: torch.logsumexp(t, dim=_dims(a, t.ndim), keepdim=k),
     (-2, 2)),
    ("norm", lambda t, a, k: torch.linalg.vector_norm(t, dim=_dims(a, t.ndim), keepdim=k),
     (-2, 2)),
]


@pytest.mark.parametrize("axis,keepdims", AXES, ids=str)
@pytest.mark.parametrize("name,tfn,domain", REDUCTIONS, ids=[r[0] for r in REDUCTIONS])
def test_reduction(name, tfn, domain, axis, keepdims):
    x = rand(2, 3, 2, low=domain[0], high=domain[1], seed=1)
    check_all(lambda a: getattr(F, name)(a, axis=axis, keepdims=keepdims),
              lambda t: tfn(t, axis, keepdims), x)


@pytest.mark.parametrize("name,expected", [("sum", -1.5), ("mean", -1.5), ("prod", -1.5),
                                           ("max", -1.5), ("min", -1.5), ("logsumexp", -1.5),
                                           ("norm", 1.5), ("var", 0.0)])
def test_reduction_of_a_0d_input_accepts_axis_0_like_torch(name, expected):
    y = getattr(F, name)(np.array(-1.5), axis=0)
    assert y.shape == () and y.item() == expected


@pytest.mark.parametrize("ddof", [0, 1, 2])
def test_var_std_ddof(ddof):
    x = rand(3, 4, seed=2)
    for name, tfn in (("var", torch.var), ("std", torch.std)):
        check_all(lambda a: getattr(F, name)(a, axis=1, ddof=ddof),
                  lambda t: tfn(t, dim=1, correction=ddof), x)
    np.testing.assert_allclose(F.var(x, ddof=1).data, np.var(x, ddof=1))


def test_var_default_is_numpy_population_variance_not_torch_sample_variance():
    x = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    assert F.var(x).item() == pytest.approx(1.25)             # numpy.var; torch.var gives 5/3
    assert F.std(x, ddof=1).item() == pytest.approx(torch.std(torch.tensor(x)).item())


# ----- max / min ties -------------------------------------------------------------------------

@pytest.mark.parametrize("name,tfn", [("max", torch.amax), ("min", torch.amin)])
def test_max_min_ties_share_the_gradient_evenly(name, tfn):
    x = np.array([[1.0, 3.0, 3.0, 3.0], [-2.0, -2.0, 0.5, 0.0]], np.float32)
    for axis in (None, 0, 1):
        dim = (0, 1) if axis is None else axis
        check_torch(lambda a: getattr(F, name)(a, axis=axis), lambda t: tfn(t, dim=dim), x)
    v = lz.Variable(x)
    F.max(v, axis=1).sum().backward()
    np.testing.assert_allclose(v.grad.data, [[0, 1 / 3, 1 / 3, 1 / 3], [0, 0, 1, 0]])


def test_two_way_tie_agrees_with_central_differences():
    check_gradient(lambda a: F.max(a, axis=1), np.array([[2.0, 2.0, 1.0], [0.0, 1.0, 1.0]]))


# ----- products with zeros --------------------------------------------------------------------

ZEROS = np.array([[0.0, 1.5, -2.0, 0.5], [0.0, 3.0, 0.0, 2.0], [1.0, -1.0, 2.0, 0.5]])


@pytest.mark.parametrize("axis", [None, 0, 1])
def test_prod_with_zeros(axis):
    tdim = None if axis is None else axis
    check_all(lambda a: F.prod(a, axis=axis),
              lambda t: t.prod() if tdim is None else t.prod(dim=tdim), ZEROS)


def test_prod_gradient_at_a_single_zero_is_the_product_of_the_others():
    x = lz.Variable(np.array([2.0, 0.0, 3.0], np.float32))
    F.prod(x).backward()
    np.testing.assert_array_equal(x.grad.data, [0, 6, 0])


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
@pytest.mark.parametrize("name,tname", [("cumsum", "cumsum"), ("cumprod", "cumprod")])
def test_cumulative(name, tname, axis):
    x = rand(3, 4, low=0.5, high=1.5, seed=3)

    def tfn(t):
        return getattr(t.flatten() if axis is None else t, tname)(dim=0 if axis is None else axis)
    check_all(lambda a: getattr(F, name)(a, axis=axis), tfn, x)


@pytest.mark.parametrize("axis", [None, 0, 1])
def test_cumprod_with_zeros(axis):
    check_all(lambda a: F.cumprod(a, axis=axis),
              lambda t: t.flatten().cumprod(0) if axis is None else t.cumprod(dim=axis), ZEROS)


def test_cumsum_flattens_like_numpy():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(F.cumsum(x).data, np.cumsum(x))
    np.testing.assert_array_equal(F.cumprod(x + 1, axis=0).data, np.cumprod(x + 1, axis=0))


# ----- logsumexp ------------------------------------------------------------------------------

def test_logsumexp_is_stable_for_large_inputs():
    x = np.array([[1000.0, 1000.0, -1000.0], [-1e4, -1e4, -1e4]], np.float32)
    with np.errstate(over="raise", invalid="raise"):     # no overflow, no nan anywhere
        v = lz.Variable(x)
        y = F.logsumexp(v, axis=1)
        y.sum().backward()
    np.testing.assert_allclose(y.data, [1000 + math.log(2), -1e4 + math.log(3)], rtol=1e-6)
    np.testing.assert_allclose(v.grad.data, [[0.5, 0.5, 0], [1 / 3, 1 / 3, 1 / 3]], rtol=1e-6)
    check_torch(lambda a: F.logsumexp(a, axis=1), lambda t: torch.logsumexp(t, dim=1), x)


def test_logsumexp_with_infinities():
    x = np.array([[-np.inf, -np.inf], [np.inf, 1.0], [-np.inf, 0.0]], np.float32)
    np.testing.assert_array_equal(F.logsumexp(x, axis=1).data, [-np.inf, np.inf, 0.0])


# ----- norm -----------------------------------------------------------------------------------

NORMS = [  # ord, axis, input shape
    (None, None, (2, 3, 2)), (2, 1, (3, 4)), (1, 0, (3, 4)), (3, -1, (3, 4)),
    (1.5, 1, (3, 4)), (0.5, 1, (3, 4)), (math.inf, 1, (3, 4)), (-math.inf, 1, (3, 4)),
    (0, 1, (3, 4)),
    ("fro", (0, 1), (3, 4)), (1, (0, 1), (3, 4)), (-1, (1, 0), (3, 4)),
    (math.inf, (0, 1), (3, 4)), (-math.inf, (2, 0), (2, 3, 4)), (None, (0, 2), (2, 3, 4)),
    (math.inf, None, (5,)), (1, None, (3, 4)),
]


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("ord,axis,shape", NORMS, ids=str)
def test_norm(ord, axis, shape, keepdims):
    x = rand(*shape, seed=4)
    check_all(lambda a: F.norm(a, ord, axis, keepdims),
              lambda t: torch.linalg.norm(t, ord, axis, keepdims), x)
    np.testing.assert_allclose(F.norm(x, ord, axis, keepdims).data,
                               np.linalg.norm(x, ord, axis, keepdims), rtol=1e-12)


def test_norm_gradient_at_zero_is_zero_as_torch():
    x = np.array([[0.0, 0.0, 0.0], [3.0, 0.0, -4.0]], np.float32)
    for ord in (2, 3):
        check_torch(lambda a: F.norm(a, ord, axis=1),
                    lambda t: torch.linalg.vector_norm(t, ord, dim=1), x)


def test_norm_does_not_overflow_in_float32():
    x = lz.Variable(np.array([3e20, -4e20], np.float32))
    y = F.norm(x)
    y.backward()
    assert y.dtype == np.float32
    np.testing.assert_allclose(y.data, 5e20, rtol=1e-6)
    np.testing.assert_allclose(x.grad.data, [0.6, -0.8], rtol=1e-6)
    np.testing.assert_allclose(F.norm(x, 3).data, np.linalg.norm(x.data.astype(np.float64), 3),
                               rtol=1e-6)


def test_norm_does_not_underflow_in_float32():
    # The squares (about 1e-59) are below float32's smallest number: they would sum to 0.
    x = lz.Variable(np.array([[3e-30, -4e-30], [0.0, 0.0]], np.float32))
    y = F.norm(x, axis=1)
    F.sum(y).backward()
    np.testing.assert_allclose(y.data, [5e-30, 0.0], rtol=1e-6)
    np.testing.assert_allclose(x.grad.data, [[0.6, -0.8], [0.0, 0.0]], rtol=1e-6)


# ----- topk -----------------------------------------------------------------------------------

@pytest.mark.parametrize("k,axis,largest", [(2, -1, True), (2, -1, False), (1, 0, True),
                                            (3, 0, False), (4, 1, True), (0, 1, True)])
def test_topk(k, axis, largest):
    x = rand(3, 4, seed=5)
    check_all(lambda a: F.topk(a, k, axis, largest).values,
              lambda t: torch.topk(t, k, axis, largest).values, x)
    check_torch(lambda a: F.topk(a, k, axis, largest),
                lambda t: torch.topk(t, k, axis, largest), x.astype(np.float32))


def test_topk_unsorted_returns_the_same_set_and_constant_indices():
    x = rand(2, 6, seed=6)
    values, indices = F.topk(lz.Variable(x), 3, sorted=False)
    ref = torch.topk(torch.tensor(x), 3).values.numpy()
    np.testing.assert_allclose(np.sort(values.data, axis=1)[:, ::-1], ref)
    np.testing.assert_array_equal(np.take_along_axis(x, indices.data, 1), values.data)
    assert not indices.requires_grad and indices.dtype == np.int64


# ----- non-differentiable reductions ----------------------------------------------------------

@pytest.mark.parametrize("name", ["argmax", "argmin", "all", "any"])
@pytest.mark.parametrize("axis,keepdims", [(None, False), (0, False), (1, True), (-1, False)])
def test_constant_reductions_match_numpy(name, axis, keepdims):
    x = np.array([[0.0, 2.0, 2.0], [1.0, -1.0, 0.0]], np.float32)
    v = lz.Variable(x)
    y = getattr(F, name)(v, axis=axis, keepdims=keepdims)
    expected = getattr(np, name)(x, axis=axis, keepdims=keepdims)
    assert not y.requires_grad and y.dtype == expected.dtype
    np.testing.assert_array_equal(y.data, expected)
    if name.startswith("arg"):
        t = getattr(torch, name)(torch.tensor(x), dim=axis, keepdim=keepdims)
        np.testing.assert_array_equal(y.data, t.numpy())


def test_all_any_over_several_axes():
    x = np.array([[[1, 0], [1, 1]], [[1, 1], [1, 1]]])
    np.testing.assert_array_equal(F.all(x, axis=(1, 2)).data, [False, True])
    np.testing.assert_array_equal(F.any(x == 0, axis=(0, 2)).data, [True, False])


# ----- bad inputs -----------------------------------------------------------------------------

X = np.ones((2, 3), np.float32)
DIFFERENTIABLE_AXIS_OPS = ["sum", "mean", "prod", "max", "min", "var", "std", "logsumexp",
                           "all", "any"]


@pytest.mark.parametrize("name", DIFFERENTIABLE_AXIS_OPS + ["argmax", "argmin", "norm",
                                                            "cumsum", "cumprod"])
def test_axis_out_of_range(name):
    with pytest.raises(ValueError, match=f"^{name}: axis 2 is out of range"):
        getattr(F, name)(X, axis=2)


@pytest.mark.parametrize("name", DIFFERENTIABLE_AXIS_OPS)
def test_bad_axis_and_keepdims(name):
    f = getattr(F, name)
    with pytest.raises(ValueError, match=f"^{name}: repeated axis"):
        f(X, axis=(1, -1))
    with pytest.raises(TypeError, match=f"^{name}: axis must be an int, got float"):
        f(X, axis=1.0)
    with pytest.raises(TypeError, match=f"^{name}: keepdims must be a bool, got str"):
        f(X, axis=1, keepdims="yes")


@pytest.mark.parametrize("name", [op.name for op in operators("reduction")])
def test_wrong_input_kind(name):
    args = (2,) if name == "topk" else ()
    with pytest.raises(TypeError, match=f"^{name}: x must be .* got str"):
        getattr(F, name)("abc", *args)


@pytest.mark.parametrize("name", ["mean", "var", "std", "logsumexp", "norm"])
def test_integer_input_to_float_only_reduction(name):
    with pytest.raises(TypeError, match=f"^{name}: x must be floating point, got dtype int"):
        getattr(F, name)(np.arange(4))


@pytest.mark.parametrize("name", ["mean", "max", "min", "logsumexp", "argmax", "argmin"])
def test_empty_reduction_raises(name):
    with pytest.raises(ValueError, match=f"^{name}: cannot reduce over zero elements"):
        getattr(F, name)(np.ones((2, 0), np.float32), axis=1)


@pytest.mark.parametrize("call,exc,match", [
    (lambda: F.var(X, ddof=-1), ValueError, "var: ddof must be >= 0"),
    (lambda: F.std(X, axis=0, ddof=2), ValueError, "std: ddof=2 leaves no degrees of freedom"),
    (lambda: F.var(X, ddof=0.5), TypeError, "var: ddof must be an int, got float"),
    (lambda: F.norm(X, "fro", axis=1), ValueError, "norm: vector ord must be .* got 'fro'"),
    (lambda: F.norm(X, -1, axis=1), ValueError, "norm: vector ord .* got -1"),
    (lambda: F.norm(X, 2, axis=(0, 1)), ValueError, "norm: matrix ord .* got 2 .*SVD"),
    (lambda: F.norm(X, "nuc"), ValueError, "norm: matrix ord .* 'nuc'"),
    (lambda: F.norm(np.ones((2, 2, 2)), 1), ValueError, r"norm: ord=1 with axis=None needs"),
    (lambda: F.norm(np.ones((2, 2, 2)), None, (0, 1, 2)), ValueError, "norm: axis must be one"),
    (lambda: F.norm(X, None, (1, 1)), ValueError, "norm: axis must be one axis or two distinct"),
    (lambda: F.norm(X, keepdims=1), TypeError, "norm: keepdims must be a bool"),
    (lambda: F.norm(np.ones((0,), np.float32), math.inf), ValueError, "norm: ord=inf of zero"),
    (lambda: F.topk(X, 4), ValueError, r"topk: k=4 is out of range for axis 1 of size 3"),
    (lambda: F.topk(X, -1), ValueError, "topk: k=-1 is out of range"),
    (lambda: F.topk(X, 1.0), TypeError, "topk: k must be an int, got float"),
    (lambda: F.topk(X, 1, axis=2), ValueError, "topk: axis 2 is out of range"),
    (lambda: F.topk(np.float32(1), 1), ValueError, "topk: x must have at least 1 dim"),
    (lambda: F.topk(X, 1, largest=None), TypeError, "topk: largest must be a bool"),
    (lambda: F.cumsum(X, axis=(0, 1)), TypeError, "cumsum: axis must be an int, got tuple"),
    (lambda: F.cumprod(np.float32(2), axis=0), ValueError, "cumprod: a 0-d input has no axis"),
    (lambda: F.argmax(X, axis=(0, 1)), TypeError, "argmax: axis must be an int or None"),
    (lambda: F.norm(X, ord=[2]), TypeError, "norm: ord must be None, a number or 'fro', got list"),
], ids=lambda v: v if isinstance(v, str) else "")
def test_bad_arguments(call, exc, match):
    with pytest.raises(exc, match="^" + match):
        call()


def test_every_reduction_is_tested():
    tested = ({r[0] for r in REDUCTIONS} | {"cumsum", "cumprod", "topk", "argmax", "argmin",
                                            "all", "any"}
              | {"sort", "argsort"})            # tests/functions/reduction/test_sorting.py
    assert tested == {op.name for op in operators("reduction")}
    assert {op.name for op in operators("reduction") if not op.differentiable} == \
        {"argmax", "argmin", "all", "any", "argsort"}


def test_float32_stays_float32():
    x = lz.Variable(rand(2, 3, dtype=np.float32, low=0.5, high=1.5, seed=7))
    outs = [getattr(F, r[0])(x, axis=1) for r in REDUCTIONS]
    outs += [F.cumsum(x), F.cumprod(x, axis=0), F.topk(x, 2).values, F.var(x, ddof=1),
             F.norm(x, 3, axis=0), F.norm(x, "fro", axis=(0, 1))]
    for y in outs:
        assert y.dtype == np.float32
        x.cleargrad()
        y.sum().backward()
        assert x.grad.dtype == np.float32


def test_reductions_on_gpu(xp):
    x = rand(2, 3, 4, dtype=np.float32, seed=8)
    for name, tfn, _ in REDUCTIONS:
        check_torch(lambda a: getattr(F, name)(a, axis=(0, 2)), lambda t: tfn(t, (0, 2), False),
                    x, xp=xp)
    z = ZEROS.astype(np.float32)
    check_torch(lambda a: F.prod(a, axis=1), lambda t: t.prod(dim=1), z, xp=xp)
    check_torch(lambda a: F.cumprod(a, axis=1), lambda t: t.cumprod(dim=1), z, xp=xp)
    check_torch(lambda a: F.cumsum(a, axis=0), lambda t: t.cumsum(dim=0), z, xp=xp)
    check_torch(lambda a: F.topk(a, 2, axis=1), lambda t: torch.topk(t, 2, dim=1), x, xp=xp)
    check_torch(lambda a: F.norm(a, math.inf, axis=(0, 1)),
                lambda t: torch.linalg.norm(t, math.inf, dim=(0, 1)), x[0], xp=xp)
