"""The bounds of ``test_kernels_match_references``: one tolerance per kernel output,
``(n + c + a) * eps * M``, derived in that module's docstring; each function here takes
the row's arguments and the reference's outputs and returns the tolerances (arrays that
broadcast against the outputs).
"""
import numpy as np

from lezero.kernels import gelu

F64 = np.float64


def EXACT(args, want):
    """Bit for bit: a zero tolerance for every output."""
    return tuple(0.0 for _ in as_tuple(want))


def as_tuple(x):
    return x if isinstance(x, tuple) else (x,)


def _eps(a):
    return float(np.finfo(a.dtype).eps)


def _f64(*arrays):
    return [np.asarray(a, F64) for a in arrays]


def _abs64(*arrays):
    return [np.abs(np.asarray(a, F64)) for a in arrays]


def summed(length, extra, magnitude):
    """The bound of a sum or (bi)linear map: ``(n + c) eps M`` with n = ``length(args)``
    and M = ``magnitude(args)``, the reference run on the operands' absolute values."""
    def bound(args, want):
        out = as_tuple(want)[0]
        return ((length(args) + extra) * _eps(out) * magnitude(args),)
    return bound


def direct_terms(which):
    """n of a tap-loop product: forward sums C/groups channels x taps per output, the
    input's gradient O/groups channels x taps, the weight's gradient N x Ho x Wo."""
    def n(args):
        a, b, out, geo, groups = args
        taps = geo[0] * geo[1]
        if which == "forward":
            return b.shape[1] * taps
        if which == "grad_input":
            return b.shape[0] // groups * taps
        return a.shape[0] * b.shape[2] * b.shape[3]
    return n


def direct_magnitude(ref):
    def m(args):
        a, b, out, geo, groups = args
        return ref(*_abs64(a, b), np.zeros(out.shape), geo, groups)
    return m


def tiles_magnitude(ref):
    def m(args):
        a, t, out, *rest = args
        return ref(*_abs64(a, t), np.zeros(out.shape), *rest)
    return m


def tiles_out_terms(args):
    """alpha**2 transformed values per output tile element, times the tiles that overlap
    at one position (ceil(a / step) per axis)."""
    _, t, _, step, *_ = args
    return t.shape[1] ** 2 * (-(-t.shape[0] // step)) ** 2


def layer_norm_bound(args, want):
    """y = (x - mean) rstd w + b with mean and variance summed over d: the mean is off by
    d eps mean|x|, rstd by (d/2 + 3) eps relative, so y by (d + 6) eps
    (|w| (mean|x| rstd + |xhat|) + |b|); mean by d eps mean|x|; rstd by (d + 6) eps rstd."""
    x, w, b = _f64(*args[:3])
    y, mean, rstd = _f64(*want)
    d = w.size
    x2 = x.reshape(-1, d)
    mean_abs = np.abs(x2).mean(axis=1)
    xhat = (x2 - mean[:, None]) * rstd[:, None]
    m_y = np.abs(w) * (mean_abs[:, None] * rstd[:, None] + np.abs(xhat)) + np.abs(b)
    e = (d + 6) * _eps(want[0])
    return e * m_y.reshape(y.shape), e * mean_abs, e * rstd


def layer_norm_grad_bound(args, want):
    """gx = rstd (g - mean(g) - xhat mean(g xhat)), g = gy w: two sums over d, so (d + 6)
    eps rstd (|g| + mean|g| + |xhat| mean|g xhat|); the parameters' gradients sum over the
    rows: (rows + 4) eps sum|gy xhat| and rows eps sum|gy|."""
    x, gy, w, mean, rstd = _f64(*args[:5])
    d = w.size
    x2, g2 = x.reshape(-1, d), gy.reshape(-1, d)
    xhat = (x2 - mean[:, None]) * rstd[:, None]
    g = np.abs(g2 * w)
    m_gx = rstd[:, None] * (g + g.mean(axis=1, keepdims=True)
                            + np.abs(xhat) * (g * np.abs(xhat)).mean(axis=1, keepdims=True))
    e, rows = _eps(want[0]), x2.shape[0]
    return ((d + 6) * e * m_gx.reshape(x.shape),
            (rows + 4) * e * np.abs(g2 * xhat).sum(axis=0).reshape(w.shape),
            rows * e * np.abs(g2).sum(axis=0).reshape(w.shape))


def _gelu_parts(x, approximate):
    """Per element: the exponential's |argument| and the largest term of GELU's formula
    relative to |x| (x Phi(x), x sigmoid(2u): 1) and of its derivative's."""
    if approximate == "tanh":
        two_u = 2 * gelu.TANH_C * (x + gelu.TANH_K * x ** 3)
        s = 1 / (1 + np.exp(-two_u))
        slope = np.abs(x) * s * (1 - s) * 2 * gelu.TANH_C * (1 + 3 * gelu.TANH_K * x * x)
        return np.abs(two_u), s + slope
    density = np.exp(-0.5 * x * x) * gelu.INV_SQRT_2PI
    return 0.5 * x * x, 1 + np.abs(x) * density


# GELU's roundings: the erfc polynomial's 1.5e-7 absolute (1.3 ulp at 1), exp32's 2 ulp
# and about eight products and sums of the formula.
GELU_ROUNDINGS = 12


def gelu_bound(args, want):
    x, = _f64(args[0])
    a, _ = _gelu_parts(x, args[1])
    return ((GELU_ROUNDINGS + a) * _eps(want) * np.abs(x),)


def gelu_grad_bound(args, want):
    x, gy = _f64(*args[:2])
    a, terms = _gelu_parts(x, args[2])
    return ((GELU_ROUNDINGS + a) * _eps(want) * np.abs(gy) * terms,)


def lstm_cell_bound(args, want):
    """Elementwise: sigmoid and tanh from one exp32 each (2 ulp, the argument's |z|),
    then the cell's two products and sum and the output's product: 8 roundings and the
    largest |z| of the step, on the gates' scale 1 and the state's 1 + |c_prev|."""
    g, hw, c = _f64(*args[:3])
    a = float(np.abs(g + hw).max(initial=0))
    e = (8 + a) * _eps(want[0])
    state = e * (1 + np.abs(c))
    return (e, state, 0.0, state, state, state, 0.0)


def lstm_cell_grad_bound(args, want):
    """Elementwise products of the gradients with the saved gates (each at most 1) and
    the old cell (|c_prev|): 8 roundings on the scale (1 + |c_prev|)(|dc| + 2 |dh + gy|)."""
    g, tanh_c, c_prev, gy, dh, dc = _f64(*args[:6])
    scale = 8 * _eps(want[0]) * (1 + np.abs(c_prev)) * (np.abs(dc) + 2 * np.abs(dh + gy))
    return (8 * _eps(want[0]) * (np.abs(dh) + np.abs(gy)), scale, np.tile(scale, 4))


def _exp_args(s, scale):
    """Per row of scores, a bound on the |argument| of exp32: |scale s - max| is at most
    2 max|scale s|."""
    z = np.abs(np.asarray(s, F64) * scale)
    return 2 * z.max(axis=-1, keepdims=True)


def softmax_bound(args, want):
    """e / sum(e): S terms summed, exp32's 2 ulp, the scaling, the reciprocal and the
    product (4), and each exponential's argument; relative to the output."""
    s, scale, causal = args
    n = s.shape[-1]
    return ((n + 4 + _exp_args(s, scale)) * _eps(want) * np.abs(want.astype(F64)),)


def softmax_grad_bound(args, want):
    """scale y (gy - sum(gy y)): a dot product of S terms and three roundings, on the
    scale |scale y| (sum|gy y| + |gy| + |sum(gy y)|)."""
    y, gy, scale = args
    y64, g64 = _f64(y, gy)
    dot = (g64 * y64).sum(axis=-1, keepdims=True)
    m = np.abs(scale * y64) * (np.abs(g64 * y64).sum(axis=-1, keepdims=True)
                               + np.abs(g64) + np.abs(dot))
    return ((y.shape[-1] + 3) * _eps(want) * m,)


def softmax_stats_bound(args, want):
    """e = exp(x - max): 2 ulp and its argument; 1 / sum(e): C terms, the row's largest
    argument; log-sum-exp: the sum's relative error, absolute after the log, plus one
    rounding of |lse|."""
    x, = args
    a = np.abs(np.asarray(x, F64) - np.asarray(x, F64).max(axis=1, keepdims=True))
    n, e = x.shape[1], _eps(want[0])
    row = (n + 4 + a.max(axis=1, initial=0))
    return ((4 + a) * e * np.abs(want[0].astype(F64)),
            row[:, None] * e * np.abs(want[1].astype(F64)),
            row * e * (1 + np.abs(want[2].astype(F64))))
