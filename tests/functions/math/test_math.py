"""The math family: every operator against central differences, double backward and PyTorch.

One table row per operator; the last test checks that the tables cover the registry.
"""
import numpy as np
import pytest
import torch

import lezero as lz
import lezero.functions as F
from lezero.functions.registry import operators
from lezero.testing import check_all, check_gradient, check_torch, rand

# name, torch function, input range (chosen inside the domain, away from kinks)
UNARY = [
    ("neg", torch.neg, -2, 2), ("square", torch.square, -2, 2),
    ("sqrt", torch.sqrt, 0.2, 3), ("rsqrt", torch.rsqrt, 0.2, 3),
    ("reciprocal", torch.reciprocal, 0.5, 2), ("exp", torch.exp, -2, 2),
    ("expm1", torch.expm1, -2, 2), ("log", torch.log, 0.2, 3),
    ("log1p", torch.log1p, -0.5, 2), ("log2", torch.log2, 0.2, 3),
    ("log10", torch.log10, 0.2, 3), ("abs", torch.abs, -2, 2),
    ("sin", torch.sin, -3, 3), ("cos", torch.cos, -3, 3), ("tan", torch.tan, -1.2, 1.2),
    ("arcsin", torch.asin, -0.9, 0.9), ("arccos", torch.acos, -0.9, 0.9),
    ("arctan", torch.atan, -2, 2), ("sinh", torch.sinh, -2, 2), ("cosh", torch.cosh, -2, 2),
    ("tanh", torch.tanh, -2, 2), ("arcsinh", torch.asinh, -2, 2),
    ("arccosh", torch.acosh, 1.2, 3), ("arctanh", torch.atanh, -0.9, 0.9),
    ("erf", torch.erf, -2, 2), ("erfc", torch.erfc, -2, 2),
]

# name, torch function, range of x0, range of x1
BINARY = [
    ("add", torch.add, (-2, 2), (-2, 2)), ("sub", torch.sub, (-2, 2), (-2, 2)),
    ("mul", torch.mul, (-2, 2), (-2, 2)), ("div", torch.div, (-2, 2), (0.5, 2)),
    ("pow", torch.pow, (0.5, 2), (-1, 2)), ("arctan2", torch.atan2, (-2, 2), (-2, 2)),
    ("hypot", torch.hypot, (-2, 2), (-2, 2)), ("maximum", torch.maximum, (-2, 2), (-2, 2)),
    ("minimum", torch.minimum, (-2, 2), (-2, 2)),
]
SHAPES = [((2, 3), (2, 3)), ((2, 3), (3,)), ((2, 1, 3), (2, 1)), ((), (2,))]

# name, torch function: not differentiable, outputs are constants
PIECEWISE = [("sign", torch.sign), ("floor", torch.floor), ("ceil", torch.ceil),
             ("round", torch.round)]

FLOAT_ONLY = ["sqrt", "rsqrt", "reciprocal", "exp", "expm1", "log", "log1p", "log2", "log10",
              "sin", "cos", "tan", "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh",
              "arcsinh", "arccosh", "arctanh", "erf", "erfc", "arctan2", "hypot"]


def _name(v):
    return v if isinstance(v, str) else ""


@pytest.mark.parametrize("name,tfn,low,high", UNARY, ids=[r[0] for r in UNARY])
def test_unary(name, tfn, low, high):
    check_all(getattr(F, name), tfn, rand(2, 3, low=low, high=high, seed=1))


@pytest.mark.parametrize("sa,sb", SHAPES, ids=str)
@pytest.mark.parametrize("name,tfn,ra,rb", BINARY, ids=[r[0] for r in BINARY])
def test_binary_broadcasting(name, tfn, ra, rb, sa, sb):
    a = rand(*sa, low=ra[0], high=ra[1], seed=2)
    b = rand(*sb, low=rb[0], high=rb[1], seed=3)
    check_all(getattr(F, name), tfn, a, b)


@pytest.mark.parametrize("name,tfn", [("maximum", torch.maximum), ("minimum", torch.minimum)])
def test_extremum_ties_split_the_gradient(name, tfn):
    a = np.array([1.0, 2.0, -3.0, 0.5])
    b = np.array([1.0, 0.0, -3.0, 4.0])
    check_torch(getattr(F, name), tfn, a.astype(np.float32), b.astype(np.float32))
    check_gradient(getattr(F, name), a, b)      # central differences also give 1/2 at a tie
    x, y = lz.Variable(a), lz.Variable(b)
    getattr(F, name)(x, y).sum().backward()
    assert x.grad.data[0] == y.grad.data[0] == 0.5


def test_abs_gradient_at_zero_is_zero_as_torch():
    check_torch(F.abs, torch.abs, np.array([0.0, -1.0, 2.0], np.float32))


@pytest.mark.parametrize("lo,hi", [(-0.5, 0.5), (None, 0.2), (-0.2, None), (0.3, -0.3)])
def test_clip_scalar_bounds(lo, hi):
    x = rand(3, 4, seed=4)
    check_all(lambda a: F.clip(a, lo, hi), lambda t: torch.clamp(t, lo, hi), x)


def test_clip_gradient_is_one_on_the_bounds_as_torch_clamp():
    x = np.array([-1.0, -0.5, 0.0, 0.5, 1.0], np.float32)
    check_torch(lambda a: F.clip(a, -0.5, 0.5), lambda t: torch.clamp(t, -0.5, 0.5), x)
    v = lz.Variable(x)
    F.clip(v, -0.5, 0.5).sum().backward()
    np.testing.assert_array_equal(v.grad.data, [0, 1, 1, 1, 0])


def test_clip_variable_bounds_get_gradients():
    # Bounds broadcast with x; where lo > hi the upper bound wins (torch.clamp's rule).
    x, lo, hi = rand(3, 4, seed=5), rand(4, low=-1, high=0.3, seed=6), rand(3, 1, low=-0.3, seed=7)
    check_all(F.clip, torch.clamp, x, lo, hi)
    check_all(lambda a, b: F.clip(a, None, b), lambda a, b: torch.clamp(a, max=b), x, hi)


def test_clip_array_bounds_are_constants():
    x, lo = rand(2, 3, seed=8), rand(3, low=-1, high=0, seed=9)
    check_all(lambda a: F.clip(a, lo.astype(a.dtype), 0.5),
              lambda t: torch.clamp(t, torch.tensor(lo, dtype=t.dtype), torch.tensor(0.5)), x)


@pytest.mark.parametrize("sc,sx,sy", [((2, 3), (2, 3), (2, 3)), ((2, 3), (3,), (2, 1)),
                                      ((3,), (2, 3), ())])
def test_where(sc, sx, sy):
    cond = rand(*sc, seed=10) > 0
    check_all(lambda x, y: F.where(cond, x, y),
              lambda x, y: torch.where(torch.tensor(cond), x, y),
              rand(*sx, seed=11), rand(*sy, seed=12))


def test_where_with_python_scalars_keeps_float32():
    x = lz.Variable(rand(2, 3, dtype=np.float32, seed=13))
    y = F.where(x.data > 0, x, 0.0)
    assert y.dtype == np.float32
    np.testing.assert_array_equal(y.data, np.maximum(x.data, 0))


@pytest.mark.parametrize("name,tfn", PIECEWISE, ids=[r[0] for r in PIECEWISE])
def test_piecewise_ops_are_constants(name, tfn):
    x = np.array([-1.5, -0.5, 0.0, 0.5, 1.5, 2.5, 0.7], np.float32)
    v = lz.Variable(x)
    y = getattr(F, name)(v)
    assert not y.requires_grad and y.creator is None and y.dtype == np.float32
    np.testing.assert_array_equal(y.data, tfn(torch.tensor(x)).numpy())
    info = {op.name: op for op in operators("math")}[name]
    assert not info.differentiable and not info.double_differentiable


def test_round_decimals_and_integers():
    x = np.array([0.125, 1.25, -2.35, 12.5], np.float32)
    np.testing.assert_allclose(F.round(x, 1).data, torch.round(torch.tensor(x), decimals=1))
    np.testing.assert_array_equal(F.round(x, -1).data, [0, 0, -0, 10])
    ints = np.array([-3, 0, 7])
    for name in ("floor", "ceil", "round"):
        y = getattr(F, name)(ints)
        assert y.dtype == ints.dtype
        np.testing.assert_array_equal(y.data, ints)


def test_erf_matches_the_error_function_at_known_points():
    y = F.erf(np.array([0.0, 1.0, -2.0], np.float32))
    np.testing.assert_allclose(y.data, [0.0, 0.8427007929, -0.9953222650], rtol=1e-6)
    np.testing.assert_allclose(F.erfc(np.array([3.0])).data, [2.209049699858544e-05],
                               rtol=1e-12)


def test_integer_true_division_gives_float32_like_torch():
    y = F.div(np.array([1, 2, 3]), np.array([2, 2, 2]))
    assert y.dtype == np.float32
    np.testing.assert_array_equal(y.data, [0.5, 1.0, 1.5])


# ----- dtypes ---------------------------------------------------------------------------------

def _call(name, x, scalar):
    """Call operator ``name`` with Variable ``x`` and a Python number where it takes two."""
    f = getattr(F, name)
    if name in ("clip",):
        return [f(x, -scalar, scalar), f(x, None, scalar)]
    if name == "where":
        return [f(x.data > 0, x, scalar), f(x.data > 0, scalar, x)]
    if name in {r[0] for r in BINARY}:
        return [f(x, scalar), f(scalar, x)]
    return [f(x)]


@pytest.mark.parametrize("name", [op.name for op in operators("math")])
def test_float32_with_python_scalars_stays_float32(name):
    low, high = {r[0]: r[2:] for r in UNARY}.get(name, (0.5, 2))
    x = lz.Variable(rand(2, 3, dtype=np.float32, low=low, high=high, seed=14))
    for y in _call(name, x, 0.5):
        assert y.dtype == np.float32, f"{name} gave {y.dtype}"
        if y.requires_grad:
            x.cleargrad()
            y.sum().backward()
            assert x.grad.dtype == np.float32


# ----- bad inputs ----------------------------------------------------------------------------

def _bad_kind_call(name):
    f = getattr(F, name)
    x = np.ones(3, np.float32)
    if name == "clip":
        return lambda: f("a", 0, 1)
    if name == "where":
        return lambda: f(x > 0, "a", x)
    if name in {r[0] for r in BINARY}:
        return lambda: f(x, [1, 2, 3])
    return lambda: f("a")


@pytest.mark.parametrize("name", [op.name for op in operators("math")])
def test_wrong_kind_raises_type_error_naming_the_operator(name):
    with pytest.raises(TypeError, match=f"^{name}: .*(str|list)"):
        _bad_kind_call(name)()


@pytest.mark.parametrize("name", FLOAT_ONLY)
def test_integer_input_to_float_only_op_raises(name):
    args = [np.arange(3)] * (2 if name in ("arctan2", "hypot") else 1)
    with pytest.raises(TypeError, match=f"^{name}: x1? must be floating point, got dtype int"):
        getattr(F, name)(*args)


@pytest.mark.parametrize("name", [r[0] for r in BINARY] + ["where", "clip"])
def test_shapes_that_do_not_broadcast_raise(name):
    a = lz.Variable(np.ones((2, 3), np.float32))
    b = np.ones((4,), np.float32)
    call = {"where": lambda: F.where(np.ones((2, 3), bool), a, b),
            "clip": lambda: F.clip(a, b, None)}.get(name, lambda: getattr(F, name)(a, b))
    with pytest.raises(ValueError, match=rf"^{name}: operands cannot be broadcast.*\(2, 3\)"):
        call()


@pytest.mark.parametrize("call,exc,match", [
    (lambda: F.clip(np.ones(2), None, None), ValueError, "clip: a_min and a_max are both None"),
    (lambda: F.where(np.ones(2), np.ones(2), 0.0), TypeError, "where: condition must be a boolean"),
    (lambda: F.where([True], np.ones(1), 0.0), TypeError, "where: condition .* list"),
    (lambda: F.round(np.ones(2), 1.5), TypeError, "round: decimals must be an int"),
    (lambda: F.pow(np.arange(3), -1), ValueError, "pow: an integer x cannot be raised"),
    (lambda: F.neg(np.ones(2, bool)), TypeError, "neg: x must be .* got dtype bool"),
    (lambda: F.sign(np.ones(2, np.complex64)), TypeError, "sign: x must be .* complex64"),
], ids=["clip-none", "where-cond-float", "where-cond-list", "round-decimals", "pow-int-neg",
        "neg-bool", "sign-complex"])
def test_bad_arguments(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_tables_cover_every_math_operator():
    tested = ({r[0] for r in UNARY} | {r[0] for r in BINARY} | {r[0] for r in PIECEWISE}
              | {"clip", "where"})
    assert tested == {op.name for op in operators("math")}


def test_elementwise_ops_on_gpu(xp):
    # On a GPU this runs the CuPy kernels (erf through cupyx.scipy.special).
    for name, tfn, low, high in UNARY[::3] + [UNARY[-2]]:
        check_torch(getattr(F, name), tfn, rand(2, 3, dtype=np.float32, low=low, high=high),
                    xp=xp)
    a, b = rand(2, 3, dtype=np.float32, seed=1), rand(3, dtype=np.float32, seed=2)
    check_torch(F.maximum, torch.maximum, a, b, xp=xp)
    check_torch(lambda u, v: F.clip(u, v, 0.5), lambda u, v: torch.clamp(u, v, torch.tensor(0.5)),
                a, b, xp=xp)
