"""Every Numba kernel against its NumPy reference, over shapes and dtypes, from one table.

Each ``kernels/<op>.py`` exposes ``<op>_numba`` (the kernel) beside ``<op>_ref``; a row
below says how to make the arguments for a shape and a dtype and how close the two must
be.  ``test_every_kernel_has_a_row`` fails when a module gains a ``*_numba`` function
without a row, so adding a kernel means adding one row.  (The kernels' own files hold
the deeper checks: definitions by brute force, adjoints, NaN and infinity handling.)

How close: a bound that follows from the arithmetic, not from one machine's result
---------------------------------------------------------------------------------
Element by element, a kernel's output may differ from the reference's by at most

    (n + c + a) * eps * M

* ``eps``: the dtype's machine epsilon (2**-23 for float32, 2**-52 for float64), twice
  the unit roundoff u.
* ``n``, the accumulation length: how many terms are summed into the element.  Summed in
  any order, n terms land within (n - 1) u sum|terms| of their exact sum (Higham,
  *Accuracy and Stability of Numerical Algorithms*, 2nd ed., section 4.2; the same for a
  dot product, section 3.1), so two orders -- the kernel's and NumPy's or BLAS's, which
  blocks and vectorises as it likes -- are at most 2 n u sum|terms| = n eps sum|terms|
  apart.  A kernel that sums in float64 is only closer.
* ``c``: the other roundings that reach the element (one per factor of a product, per
  division, per step of a formula), and an approximation's own error in ulps (exp32's 2,
  the Abramowitz-Stegun erfc's 1.5e-7 = 1.3 ulp at 1): a small count, stated per row.
* ``a``: for a kernel that exponentiates, |z| of its argument z: rounding z costs
  |z| u relative in e^z, a second time in the other order's rounding.
* ``M``, the magnitude the error scales with: sum|terms| for sums and (bi)linear maps --
  the reference evaluated in float64 on the absolute values of its operands, which is
  exactly that sum -- and for elementwise formulas the largest term of the formula (for
  a normalised output such as softmax's, the output itself).

A bound of this form is sound for every machine and BLAS, and still tight enough that a
real bug fails it: an element computed with one term too few (a loop bound off by one)
is off by that term, about M / n, which exceeds n eps M while n**2 eps < 1 (n up to about
2900 in float32); ``test_the_bounds_catch_one_term_too_few`` checks it on every summing
row.  Rows marked ``EXACT`` are bit for bit: their kernels copy, select, or sum in
exactly NumPy's order by design (``bias_grad`` adds rows in order as NumPy's axis-0 sum
of a C-contiguous array does, the scatter adds in index order as ``np.add.at``, col2im
adds taps in the reference's order, the optimizer updates reproduce torch's arithmetic).
"""
import copy
import dataclasses
import math

import numpy as np
import pytest

import lezero as lz
from lezero.kernels import (adam, add, axpy, bias, conv_direct, gelu, im2col, layernorm,
                            lstm, numba_available, pooling, relu, scatter, softmax, winograd)
from tests.kernels import kernel_bounds as B

pytestmark = pytest.mark.skipif(not numba_available(), reason="Numba is not installed")

F32, F64 = np.float32, np.float64
MODULES = (adam, add, axpy, bias, conv_direct, gelu, im2col, layernorm, lstm, pooling, relu,
           scatter, softmax, winograd)


@dataclasses.dataclass
class Row:
    """``numba(*make(shape, dtype, rng))`` must equal ``ref(*...)`` (on copies of the
    arguments: several kernels work in place) within ``bound(args, want)``: one tolerance
    per output (an array broadcasting against it, see the module docstring) for the
    arguments and the reference's outputs; ``dispatch`` is what operators call."""
    numba: object
    ref: object
    dispatch: object
    make: object
    shapes: tuple
    bound: object
    dtypes: tuple = (F32, F64)


def _first(fn):
    """``fn`` with its first result alone (the values of a (values, positions) pair)."""
    def run(*args):
        return fn(*args)[0]
    run.kernel = fn
    return run


def _returns(fn, *which):
    """``fn`` made to return the arguments it updates in place (by position)."""
    def run(*args):
        fn(*args)
        return tuple(args[i] for i in which)
    run.kernel = fn
    return run


# ----- argument makers: (shape, dtype, rng) -> args --------------------------------------

def _scatter(shape, dtype, rng):
    rows, width, n = shape
    index = rng.integers(-rows, rows, size=n)               # repeats and negative indices
    return (np.zeros((rows,) + width, dtype), index,
            rng.standard_normal((n,) + width).astype(dtype))


MAX_POOLS = (((6, 7, 7), (3, 3), (2, 2), (1, 1), (1, 1)),
             ((2, 9, 8), (2, 3), (1, 2), (0, 1), (2, 1)),
             ((3, 8, 6), (2, 2), (2, 2), (0, 0), (1, 1)),
             # larger (the split over threads: test_pooling_kernels)
             ((384, 14, 14), (2, 2), (2, 2), (0, 0), (1, 1)),
             ((300, 15, 13), (3, 3), (2, 2), (1, 1), (1, 1)))


def _max_pool(shape, dtype, rng):
    (R, H, W), k, s, p, d = shape
    out = tuple((n + 2 * q - e * (kk - 1) - 1) // ss + 1
                for n, kk, ss, q, e in zip((H, W), k, s, p, d))
    return rng.standard_normal((R, H, W)).astype(dtype), k, s, p, d, out


def _layer_norm(shape, dtype, rng):
    *lead, d = shape[0]
    x = rng.standard_normal(shape[0]).astype(dtype)
    return (x, rng.standard_normal(d).astype(dtype), rng.standard_normal(d).astype(dtype),
            1e-5, shape[1])


def _layer_norm_grad(shape, dtype, rng):
    x, w, b, eps, center = _layer_norm(shape, dtype, rng)
    _, mean, rstd = layernorm.layer_norm_ref(x, w, b, eps, center)
    return x, rng.standard_normal(x.shape).astype(dtype), w, mean, rstd, center


def _gelu(shape, dtype, rng):
    return rng.uniform(-6, 6, shape[0]).astype(dtype), shape[1]


def _gelu_grad(shape, dtype, rng):
    x, approximate = _gelu(shape, dtype, rng)
    return x, rng.standard_normal(x.shape).astype(dtype), approximate


def _lstm_cell(shape, dtype, rng):
    rows, hidden = shape
    state = [rng.standard_normal((rows, hidden)).astype(dtype) for _ in range(2)]     # c, h
    return (3 * rng.standard_normal((rows, 4 * hidden)).astype(dtype),               # g
            rng.standard_normal((rows, 4 * hidden)).astype(dtype),                   # hw
            state[0], *[np.zeros((rows, hidden), dtype) for _ in range(3)], state[1],
            np.zeros((rows, hidden), dtype))       # c, c_prev, tanh_c, y, h, h_prev


def _lstm_cell_grad(shape, dtype, rng):
    g, hw, c, c_prev, tanh_c, y, h, h_prev = _lstm_cell(shape, dtype, rng)
    lstm.lstm_cell_ref(g, hw, c, c_prev, tanh_c, y, h, h_prev)        # activated gates
    return (g, tanh_c, c_prev, *[rng.standard_normal(c.shape).astype(dtype) for _ in range(3)],
            np.zeros_like(g))                      # gy, dh, dc, dg


def _relu(shape, dtype, rng):
    x = rng.standard_normal(shape).astype(dtype)
    x.reshape(-1)[:4] = (0, np.nan, -0.0, -np.inf)     # the kink, NaN (kept), signed zero
    return (x,)


def _add(shape, dtype, rng):
    x0, x1 = (rng.standard_normal(shape).astype(dtype) for _ in range(2))
    x0.reshape(-1)[:3] = (np.nan, np.inf, -0.0)          # NaN and infinity pass; -0 + 0
    x1.reshape(-1)[:3] = (1.0, 2.0, 0.0)
    return x0, x1


def _relu_grad(shape, dtype, rng):
    x = rng.standard_normal(shape).astype(dtype)
    x.reshape(-1)[:3] = (0, np.nan, -0.0)          # the kink, NaN, a signed zero: gradient 0
    return x, rng.standard_normal(shape).astype(dtype)


def _axpby(shape, dtype, rng):
    size, b, a = shape
    return (rng.standard_normal(size).astype(dtype), b,
            rng.standard_normal(size).astype(dtype), a)


def _add_bias(shape, dtype, rng):
    return (rng.standard_normal(shape).astype(dtype),
            rng.standard_normal(shape[1]).astype(dtype))


def _bias_grad(shape, dtype, rng):
    return (rng.standard_normal(shape).astype(dtype),)


def _softmax(shape, dtype, rng):
    return rng.uniform(-8, 8, shape[0]).astype(dtype), 0.7, shape[1]


def _softmax_grad(shape, dtype, rng):
    y = softmax.masked_softmax_ref(rng.standard_normal(shape).astype(dtype), 1.0)
    return y, rng.standard_normal(shape).astype(dtype), 1.3


def _stats(shape, dtype, rng):
    return (rng.uniform(-20, 20, shape).astype(dtype),)


def _geo(x_shape, kernel, stride, pad, dil):
    out = tuple((n + 2 * p - d * (k - 1) - 1) // s + 1
                for n, k, s, p, d in zip(x_shape[2:], kernel, stride, pad, dil))
    return kernel + stride + pad + dil + out


def _im2col(shape, dtype, rng):
    geo = _geo(*shape)
    x = rng.standard_normal(shape[0]).astype(dtype)
    col = np.zeros((x.shape[1] * math.prod(geo[0:3]), x.shape[0], math.prod(geo[12:15])),
                   dtype)
    return x, col, geo


def _col2im(shape, dtype, rng):
    x, col, geo = _im2col(shape, dtype, rng)
    return rng.standard_normal(col.shape).astype(dtype), np.zeros_like(x), geo


def _direct(shape, dtype, rng, which):
    x_shape, w_shape, geo, groups = shape
    kh, kw, sh, sw, ph, pw, dh, dw = geo
    y_shape = (x_shape[0], w_shape[0],
               (x_shape[2] + 2 * ph - dh * (kh - 1) - 1) // sh + 1,
               (x_shape[3] + 2 * pw - dw * (kw - 1) - 1) // sw + 1)
    arrays = {k: rng.standard_normal(s).astype(dtype)
              for k, s in (("x", x_shape), ("w", w_shape), ("gy", y_shape))}
    if which == "forward":
        return arrays["x"], arrays["w"], np.zeros(y_shape, dtype), geo, groups
    if which == "grad_input":
        return arrays["gy"], arrays["w"], np.zeros(x_shape, dtype), geo, groups
    return arrays["x"], arrays["gy"], np.zeros(w_shape, dtype), geo, groups


def _tiles_in(shape, dtype, rng):
    x_shape, m, py, px, th, tw = shape
    _, _, bt = winograd.winograd_matrices(m)
    v = np.zeros(((m + 2) ** 2, x_shape[1], x_shape[0] * th * tw), dtype)
    return rng.standard_normal(x_shape).astype(dtype), bt.astype(dtype), v, m, py, px, th, tw


def _tiles_out(shape, dtype, rng):
    x_shape, m, py, px, th, tw = shape
    at, _, _ = winograd.winograd_matrices(m)
    v = rng.standard_normal(((m + 2) ** 2, x_shape[1], x_shape[0] * th * tw)).astype(dtype)
    return v, at.astype(dtype), np.zeros(x_shape, dtype), m, py, px, th, tw


def _in_float64(ref):
    """``ref`` evaluated in float64 and rounded to the inputs' dtype: the float32 kernels
    work from the tail where float32 arithmetic cancels (1 + tanh u for u << 0)."""
    def run(*args):
        wide = [a.astype(F64) if isinstance(a, np.ndarray) else a for a in args]
        return ref(*wide).astype(args[0].dtype)
    run.plain = ref
    return run


def _adam(shape, dtype, rng):
    p, g, m = (rng.standard_normal(shape[0]).astype(dtype) for _ in range(3))
    v = rng.uniform(0.1, 1, shape[0]).astype(dtype)
    vmax = v.copy() if shape[1]["amsgrad"] else None
    return p, g, m, v, vmax, shape[1]


def _adam_step(fn):
    def run(p, g, m, v, vmax, options):
        hyper = dict(lr=0.01, beta1=0.9, beta2=0.99, eps=1e-8, weight_decay=0.1, step=3)
        hyper.update({k: options[k] for k in ("decoupled", "maximize")})
        fn(p, g, m, v, vmax, **hyper)
        return p, m, v, vmax
    run.kernel = fn
    return run


CONV_GEOMETRIES = (((2, 3, 1, 6, 7), (1, 3, 3), (1, 1, 1), (0, 1, 1), (1, 1, 1)),
                   ((1, 2, 1, 9, 8), (1, 3, 2), (1, 2, 3), (0, 2, 0), (1, 2, 1)),
                   ((1, 2, 4, 5, 3), (2, 3, 2), (2, 1, 1), (1, 1, 1), (1, 1, 2)))
DIRECT = (((2, 3, 7, 8), (4, 3, 3, 3), (3, 3, 1, 1, 1, 1, 1, 1), 1),
          ((3, 4, 9, 8), (6, 2, 3, 4), (3, 4, 1, 1, 0, 0, 1, 1), 2),     # wide rows
          ((2, 1, 12, 12), (6, 1, 5, 5), (5, 5, 1, 1, 0, 0, 1, 1), 1),  # LeNet's first layer
          ((1, 4, 9, 7), (6, 2, 3, 2), (3, 2, 2, 3, 1, 2, 2, 1), 2),
          ((2, 4, 6, 6), (8, 1, 3, 3), (3, 3, 1, 2, 2, 0, 1, 2), 4))
TILINGS = (((2, 3, 7, 9), 2, 1, 1, 4, 5), ((1, 2, 5, 5), 4, -1, 3, 3, 1))
NORMS = (((4, 7), True), ((2, 3, 33), True), ((5, 16), False),
         ((1000, 128), True))     # many blocks of FOLD_ROWS rows, the last one partial
ELEMENTWISE = (((1000,), "none"), ((7, 13), "tanh"))
SCORES = (((3, 5, 5), False), ((2, 4, 6), True), ((2, 1, 9), False))
FLOAT32_ONLY = (F32,)
LSTM_STATES = ((3, 5), (20, 33), (1, 1))          # (batch rows, hidden)

ROWS = {
    "scatter_add_rows": Row(_returns(scatter.scatter_add_rows_, 0),
                            _returns(scatter.scatter_add_ref, 0),
                            _returns(scatter.scatter_add_, 0), _scatter,
                            ((7, (3,), 20), (5, (), 9), (4, (2, 3), 6), (3, (2,), 0)), B.EXACT),
    "max_pool2d": Row(pooling.max_pool2d_numba, pooling.max_pool_ref, pooling.max_pool,
                      _max_pool, MAX_POOLS, B.EXACT),
    "max_values2d": Row(pooling.max_values2d_numba, _first(pooling.max_pool_ref),
                        pooling.max_values, _max_pool, MAX_POOLS, B.EXACT),
    "layer_norm": Row(layernorm.layer_norm_numba, layernorm.layer_norm_ref,
                      layernorm.layer_norm, _layer_norm, NORMS, B.layer_norm_bound),
    "layer_norm_grad": Row(layernorm.layer_norm_grad_numba, layernorm.layer_norm_grad_ref,
                           layernorm.layer_norm_grad, _layer_norm_grad, NORMS,
                           B.layer_norm_grad_bound),
    "gelu": Row(gelu.gelu_numba, _in_float64(gelu.gelu_ref), gelu.gelu, _gelu, ELEMENTWISE,
                B.gelu_bound, FLOAT32_ONLY),
    "gelu_grad": Row(gelu.gelu_grad_numba, _in_float64(gelu.gelu_grad_ref), gelu.gelu_grad,
                     _gelu_grad, ELEMENTWISE, B.gelu_grad_bound, FLOAT32_ONLY),
    "lstm_cell": Row(_returns(lstm.lstm_cell_numba, 0, 2, 3, 4, 5, 6, 7),
                     _returns(lstm.lstm_cell_ref, 0, 2, 3, 4, 5, 6, 7),
                     _returns(lstm.lstm_cell, 0, 2, 3, 4, 5, 6, 7), _lstm_cell, LSTM_STATES,
                     B.lstm_cell_bound, FLOAT32_ONLY),
    "lstm_cell_grad": Row(_returns(lstm.lstm_cell_grad_numba, 4, 5, 6),
                          _returns(lstm.lstm_cell_grad_ref, 4, 5, 6),
                          _returns(lstm.lstm_cell_grad, 4, 5, 6), _lstm_cell_grad, LSTM_STATES,
                          B.lstm_cell_grad_bound, FLOAT32_ONLY),
    "add": Row(add.add_numba, add.add_ref, add.add, _add,
               ((7,), (3, 5, 4), (64, 6, 28, 28)), B.EXACT),
    "relu": Row(relu.relu_numba, relu.relu_ref, relu.relu, _relu,
                ((7,), (3, 5, 4), (64, 6, 28, 28)), B.EXACT),
    "relu_grad": Row(relu.relu_grad_numba, relu.relu_grad_ref, relu.relu_grad, _relu_grad,
                     ((7,), (3, 5, 4), (64, 6, 28, 28)), B.EXACT),
    # (shape, b, a): SGD's step, momentum's buffer, dampened momentum: bit for bit
    "axpby": Row(_returns(axpy.axpby_numba, 0), _returns(axpy.axpby_ref, 0),
                 _returns(axpy.axpby_, 0), _axpby,
                 (((1000, 3), 1.0, -0.01), ((7,), 0.9, 1.0), ((), 0.9, 0.7),
                  ((30, 20), 0.5, 1e-3)), B.EXACT),
    # a linear layer's bias and its gradient: bit for bit, as NumPy's sum over axis 0
    "add_bias": Row(_returns(bias.add_bias_numba, 0), _returns(bias.add_bias_ref, 0),
                    _returns(bias.add_bias_, 0), _add_bias, ((1, 1), (7, 3), (100, 1000)),
                    B.EXACT),
    "bias_grad": Row(bias.bias_grad_numba, bias.bias_grad_ref, bias.bias_grad, _bias_grad,
                     ((1, 1), (7, 3), (100, 1000), (1024, 384), (0, 5)), B.EXACT),
    "masked_softmax": Row(softmax.masked_softmax_numba, softmax.masked_softmax_ref,
                          softmax.masked_softmax, _softmax, SCORES, B.softmax_bound,
                          FLOAT32_ONLY),
    "softmax_grad": Row(softmax.softmax_grad_numba, softmax.softmax_grad_ref,
                        softmax.softmax_grad, _softmax_grad, ((3, 7), (2, 3, 16)),
                        B.softmax_grad_bound, FLOAT32_ONLY),
    "softmax_stats": Row(softmax.softmax_stats_numba, softmax.softmax_stats_ref,
                         softmax.softmax_stats, _stats, ((4, 9), (1, 64)),
                         B.softmax_stats_bound, FLOAT32_ONLY),
    # copies, and sums of overlapping windows in the reference's tap order: bit for bit
    "im2col": Row(im2col.im2col_numba, im2col.im2col_ref, im2col.im2col, _im2col,
                  CONV_GEOMETRIES, B.EXACT),
    "col2im": Row(im2col.col2im_numba, im2col.col2im_ref, im2col.col2im, _col2im,
                  CONV_GEOMETRIES, B.EXACT),
    "direct_forward": Row(conv_direct.direct_forward_numba, conv_direct.direct_forward_ref,
                          conv_direct.direct_forward,
                          lambda s, d, r: _direct(s, d, r, "forward"), DIRECT,
                          B.summed(B.direct_terms("forward"), 1,
                                 B.direct_magnitude(conv_direct.direct_forward_ref))),
    "direct_grad_input": Row(conv_direct.direct_grad_input_numba,
                             conv_direct.direct_grad_input_ref, conv_direct.direct_grad_input,
                             lambda s, d, r: _direct(s, d, r, "grad_input"), DIRECT,
                             B.summed(B.direct_terms("grad_input"), 1,
                                    B.direct_magnitude(conv_direct.direct_grad_input_ref))),
    "direct_grad_weight": Row(conv_direct.direct_grad_weight_numba,
                              conv_direct.direct_grad_weight_ref,
                              conv_direct.direct_grad_weight,
                              lambda s, d, r: _direct(s, d, r, "grad_weight"), DIRECT,
                              B.summed(B.direct_terms("grad_weight"), 1,
                                     B.direct_magnitude(conv_direct.direct_grad_weight_ref))),
    # T d T^T: a**2 products of three factors per element
    "tiles_in": Row(winograd.tiles_in_numba, winograd.tiles_in_ref, winograd.tiles_in,
                    _tiles_in, TILINGS,
                    B.summed(lambda args: args[1].shape[1] ** 2, 2,
                           B.tiles_magnitude(winograd.tiles_in_ref))),
    "tiles_out": Row(winograd.tiles_out_numba, winograd.tiles_out_ref, winograd.tiles_out,
                     _tiles_out, TILINGS,
                     B.summed(B.tiles_out_terms, 2, B.tiles_magnitude(winograd.tiles_out_ref))),
    "adam_step": Row(_adam_step(adam.adam_step_numba), _adam_step(adam.adam_step_ref),
                     _adam_step(adam.adam_step_), _adam,
                     (((5, 7), dict(amsgrad=False, decoupled=False, maximize=False)),
                      ((33,), dict(amsgrad=True, decoupled=True, maximize=True)),
                      ((), dict(amsgrad=False, decoupled=False, maximize=True))),
                     B.EXACT),          # bit for bit, as torch parity needs
}

CASES = [pytest.param(name, shape, dtype, id=f"{name}-{k}-{np.dtype(dtype).name}")
         for name, row in ROWS.items() for k, shape in enumerate(row.shapes)
         for dtype in row.dtypes]


def _compare(got, want, bounds, where):
    """Every output within its bound (see the module docstring); NaN where the reference
    has NaN, infinities equal."""
    got, want = B.as_tuple(got), B.as_tuple(want)
    assert len(got) == len(want), where
    for k, (a, b) in enumerate(zip(got, want)):
        if b is None:
            assert a is None, where
            continue
        assert a.shape == b.shape and a.dtype == b.dtype, \
            f"{where} output {k}: {a.dtype}{a.shape} vs reference {b.dtype}{b.shape}"
        a64, b64 = a.astype(F64), b.astype(F64)
        tol = np.broadcast_to(np.asarray(bounds[k], F64), b.shape)
        with np.errstate(invalid="ignore"):
            ok = (a64 == b64) | (np.abs(a64 - b64) <= tol) | (np.isnan(a64) & np.isnan(b64))
        if not ok.all():
            i = np.unravel_index(np.argmax(~ok), ok.shape)
            raise AssertionError(f"{where} output {k}: {int((~ok).sum())} of {ok.size} "
                                 f"elements outside the bound; at {i}: kernel {a64[i]!r}, "
                                 f"reference {b64[i]!r}, |difference| "
                                 f"{abs(a64[i] - b64[i]):.3g} > bound {tol[i]:.3g}")


@pytest.mark.parametrize("name,shape,dtype", CASES)
def test_kernel_equals_its_reference(name, shape, dtype):
    row = ROWS[name]
    args = row.make(shape, dtype, np.random.default_rng(0))
    got = row.numba(*copy.deepcopy(args))
    want = row.ref(*copy.deepcopy(args))
    _compare(got, want, row.bound(args, want), f"{name}{shape}")


@pytest.mark.parametrize("name", [n for n, r in ROWS.items() if F64 not in r.dtypes])
def test_float32_kernels_leave_float64_to_the_reference(name):
    """The dispatcher of a float32-only kernel gives the reference's numbers in float64."""
    row = ROWS[name]
    args = row.make(row.shapes[0], F64, np.random.default_rng(1))
    want = row.ref(*copy.deepcopy(args))
    _compare(row.dispatch(*copy.deepcopy(args)), want, B.EXACT(args, want), name)


@pytest.mark.parametrize("name", list(ROWS))
def test_dispatcher_picks_the_kernel_and_with_numba_off_the_reference(name):
    row = ROWS[name]
    args = row.make(row.shapes[0], F32, np.random.default_rng(2))
    want = row.numba(*copy.deepcopy(args))
    _compare(row.dispatch(*copy.deepcopy(args)), want, B.EXACT(args, want), name)
    with lz.using_config("use_numba", False):
        got = row.dispatch(*copy.deepcopy(args))
    want = getattr(row.ref, "plain", row.ref)(*copy.deepcopy(args))
    _compare(got, want, B.EXACT(args, want), name)


def test_every_kernel_has_a_row():
    kernels = {f"{m.__name__}.{n}" for m in MODULES for n, f in vars(m).items()
               if n.endswith(("_numba", "_rows_")) and callable(f)}
    covered = {f"{k.__module__}.{k.__name__}"
               for k in (getattr(r.numba, "kernel", r.numba) for r in ROWS.values())}
    missing = sorted(kernels - covered)
    assert not missing, f"kernels without a row in ROWS ({__file__}): {missing}"


SUMMING = ["direct_forward", "direct_grad_input", "direct_grad_weight", "tiles_in",
           "tiles_out"]


def _one_term_too_few(row, args):
    """The reference run with one term gone: the largest input element that some output
    reads, set to zero (an element no window reads changes nothing and is skipped)."""
    want = row.ref(*copy.deepcopy(args))
    for j in np.argsort(-np.abs(args[0]), axis=None):
        broken = list(copy.deepcopy(args))
        broken[0].reshape(-1)[j] = 0
        got = row.ref(*broken)
        if not np.array_equal(got, want):
            return got, want
    raise AssertionError("no input element changes the output")


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("name", SUMMING)
def test_the_bounds_catch_one_term_too_few(name, dtype):
    """What a loop bound off by one does -- an element summed with one term too few --
    falls outside the bound, on every shape of every summing row (the reference with
    that term removed stands for the broken kernel)."""
    row = ROWS[name]
    for shape in row.shapes:
        args = row.make(shape, dtype, np.random.default_rng(3))
        got, want = _one_term_too_few(row, args)
        with pytest.raises(AssertionError, match="outside the bound"):
            _compare(got, want, row.bound(args, want), f"{name}{shape}")


@pytest.mark.skipif(not numba_available(), reason="needs Numba")
def test_layer_norm_parameter_gradients_stay_accurate_over_many_rows():
    """The weight and bias gradients sum 20 000 rows: in float32 blocks folded into
    float64, they match a float64 sum to float32 rounding, not to the drift of one long
    float32 sum."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((20_000, 16)).astype(np.float32)
    gy = (rng.standard_normal(x.shape) + 1.0).astype(np.float32)     # no cancellation
    w = rng.standard_normal(16).astype(np.float32)
    _, mean, rstd = layernorm.layer_norm_numba(x, w, np.zeros(16, np.float32), 1e-5)
    _, gw, gb = layernorm.layer_norm_grad_numba(x, gy, w, mean, rstd)
    xhat = (x.astype(np.float64) - mean[:, None]) * rstd[:, None]
    np.testing.assert_allclose(gb, gy.astype(np.float64).sum(0), rtol=2e-6)
    np.testing.assert_allclose(gw, (gy * xhat).sum(0), rtol=1e-5, atol=1e-3)
