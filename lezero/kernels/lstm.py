"""One time step of the fused LSTM layer: the elementwise work around the recurrent product.

A step of ``lezero.functions.rnn.layers.LSTMLayer`` is one GEMM (``h @ W_hh^T``, done by
BLAS) and then, per element of the (B, H) state, three sigmoids and two tanh, the cell
update and a few copies.  NumPy spends about twelve calls on that (each a pass over a
small array with its own call overhead), and the backward step about twenty; at the
classic word-model shape (B 20, H 256, 35 steps) they cost as much as the GEMMs.  The
kernels do a step's elementwise work in one pass:

* ``lstm_cell`` (forward): ``g += hw``; the gates i, f, o through the sigmoid and g
  through tanh (kept activated in ``g`` for the backward); ``c_prev <- c``,
  ``c <- f c + i g``, ``tanh_c <- tanh(c)``, ``y <- o tanh(c)``; ``h_prev <- h``,
  ``h <- y``.
* ``lstm_cell_grad`` (backward): with ``dh += gy`` (the step's output gradient),
  ``dc += dh o (1 - tanh(c)^2)``, the four gate gradients through their activations
  into ``dg``, and ``dc <- dc f`` (the previous step's cell gradient).

``lstm_cell_ref`` / ``lstm_cell_grad_ref`` are the NumPy (and CuPy) reference;
``lstm_cell_numba`` / ``lstm_cell_grad_numba`` run the float32 kernels, whose sigmoid and
tanh come from ``fastexp.exp32`` (inlined, so the loops vectorise): ``sigmoid(x) =
1 / (1 + e^-x)`` and ``tanh(x) = 1 - 2 / (1 + e^2x)``, within a few float32 ulps of 1 in
absolute terms.  float64 always takes the reference.  ``lstm_cell`` and
``lstm_cell_grad`` dispatch.
"""
import numpy as np

from lezero.kernels import enabled, jit
from lezero.kernels.fastexp import FAST, exp32

__all__ = ["lstm_cell", "lstm_cell_grad", "pick", "sigmoid_inplace", "lstm_cell_ref",
           "lstm_cell_grad_ref", "lstm_cell_numba", "lstm_cell_grad_numba"]


# ----- NumPy reference ---------------------------------------------------------------------

def _xp(a):
    from lezero.cuda import get_array_module
    return get_array_module(a)


def sigmoid_inplace(xp, a):
    """In-place logistic function on a raw array, via tanh so it never overflows (the
    references' sigmoid; the GRU layer's too)."""
    a *= 0.5
    xp.tanh(a, out=a)
    a *= 0.5
    a += 0.5
    return a


def lstm_cell_ref(g, hw, c, c_prev, tanh_c, y, h, h_prev):
    """One forward step in place (all (B, 4H) or (B, H) arrays, see the module
    docstring): ``g`` gets the activated gates, ``c`` and ``h`` the new state, ``c_prev``
    and ``h_prev`` the old one, ``tanh_c`` and ``y`` what the backward reads."""
    xp = _xp(g)
    hidden = c.shape[1]
    two, three = 2 * hidden, 3 * hidden
    g += hw
    sigmoid_inplace(xp, g[:, :two])
    xp.tanh(g[:, two:three], out=g[:, two:three])
    sigmoid_inplace(xp, g[:, three:])
    c_prev[...] = c
    c *= g[:, hidden:two]
    c += g[:, :hidden] * g[:, two:three]
    xp.tanh(c, out=tanh_c)
    xp.multiply(g[:, three:], tanh_c, out=y)
    h_prev[...] = h
    h[...] = y


def lstm_cell_grad_ref(g, tanh_c, c_prev, gy, dh, dc, dg):
    """One backward step in place: ``dh`` gets ``gy`` added, ``dc`` becomes the previous
    step's cell gradient and ``dg`` the gradient of the pre-activation gates."""
    xp = _xp(g)
    hidden = dh.shape[1]
    two, three = 2 * hidden, 3 * hidden
    dh += gy
    t = tanh_c * tanh_c                                         # dc += dh o (1 - tanh(c)^2)
    xp.subtract(1, t, out=t)
    t *= g[:, three:]
    t *= dh
    dc += t
    xp.multiply(dh, tanh_c, out=dg[:, three:])                 # d o
    xp.multiply(dc, g[:, two:three], out=dg[:, :hidden])       # d i
    xp.multiply(dc, c_prev, out=dg[:, hidden:two])            # d f
    xp.multiply(dc, g[:, :hidden], out=dg[:, two:three])       # d g
    dc *= g[:, hidden:two]
    # Through the activations: sigmoid' = s (1 - s), tanh' = 1 - t^2.
    s = g[:, :two]
    dg[:, :two] *= s - s * s
    s = g[:, three:]
    dg[:, three:] *= s - s * s
    s = g[:, two:three]
    dg[:, two:three] *= 1 - s * s


# ----- Numba kernels (float32) ----------------------------------------------------------------

_ONE, _TWO = np.float32(1.0), np.float32(2.0)


@jit(cache=True, fastmath=FAST, error_model="numpy", inline="always")
def _sigmoid32(x):
    return _ONE / (_ONE + exp32(-x))


@jit(cache=True, fastmath=FAST, error_model="numpy", inline="always")
def _tanh32(x):
    return _ONE - _TWO / (_ONE + exp32(_TWO * x))


@jit(cache=True, fastmath=FAST, error_model="numpy", inline="always")
def _cell_row(i, f, u, o, hi, hf, hu, ho, cn, cpn, tn, yn, hpn, h_old, h_new):
    """One row of a forward step: the gate rows ``i f u o`` (pre-activation, from the
    input projection) get the recurrent rows ``hi hf hu ho`` added and are activated in
    place; then the cell ``cn``, and the saved rows: previous cell ``cpn``, ``tanh(c)``
    ``tn``, output ``yn``, previous hidden ``hpn`` (copied from ``h_old``); ``h_new``
    gets the output (it may be ``h_old`` itself)."""
    # Short loops from 0 over one-dimensional views, each touching few arrays: LLVM
    # vectorises those.  Indices like g[n, 2 * hidden + j] (a start Numba cannot prove
    # non-negative) or one loop over all the arrays (too many possible overlaps) run
    # scalar, three to four times slower.
    for j in range(i.size):
        i[j] = _sigmoid32(i[j] + hi[j])
    for j in range(f.size):
        f[j] = _sigmoid32(f[j] + hf[j])
    for j in range(u.size):
        u[j] = _tanh32(u[j] + hu[j])
    for j in range(o.size):
        o[j] = _sigmoid32(o[j] + ho[j])
    cpn[:] = cn
    hpn[:] = h_old
    for j in range(cn.size):
        cn[j] = f[j] * cn[j] + i[j] * u[j]
    for j in range(cn.size):
        tn[j] = _tanh32(cn[j])
    for j in range(yn.size):
        yn[j] = o[j] * tn[j]
    h_new[:] = yn


@jit(cache=True, fastmath=FAST, error_model="numpy")
def _cell(g, hw, c, c_prev, tanh_c, y, h, h_prev):
    hidden = c.shape[1]
    for n in range(c.shape[0]):
        gn, hn = g[n], hw[n]
        _cell_row(gn[:hidden], gn[hidden:2 * hidden], gn[2 * hidden:3 * hidden],
                  gn[3 * hidden:], hn[:hidden], hn[hidden:2 * hidden],
                  hn[2 * hidden:3 * hidden], hn[3 * hidden:], c[n], c_prev[n], tanh_c[n],
                  y[n], h_prev[n], h[n], h[n])


@jit(cache=True, fastmath=FAST, error_model="numpy", inline="always")
def _cell_grad_row(i, f, u, o, di, df, du, do, t, cp, dhn, dcn, gyn):
    """One row of a backward step: activated gates ``i f u o``, their gradients out,
    ``tanh(c)`` ``t``, previous cell ``cp``; ``dhn`` += ``gyn``, ``dcn`` becomes the
    previous step's cell gradient."""
    for j in range(dhn.size):
        dhn[j] = dhn[j] + gyn[j]
    for j in range(dcn.size):
        dcn[j] = dcn[j] + dhn[j] * o[j] * (_ONE - t[j] * t[j])
    for j in range(do.size):
        do[j] = dhn[j] * t[j] * (o[j] - o[j] * o[j])
    for j in range(di.size):
        di[j] = dcn[j] * u[j] * (i[j] - i[j] * i[j])
    for j in range(df.size):
        df[j] = dcn[j] * cp[j] * (f[j] - f[j] * f[j])
    for j in range(du.size):
        du[j] = dcn[j] * i[j] * (_ONE - u[j] * u[j])
    for j in range(dcn.size):
        dcn[j] = dcn[j] * f[j]


@jit(cache=True, fastmath=FAST, error_model="numpy")
def _cell_grad(g, tanh_c, c_prev, gy, dh, dc, dg):
    hidden = dh.shape[1]
    for n in range(dh.shape[0]):
        gn, dgn = g[n], dg[n]
        _cell_grad_row(gn[:hidden], gn[hidden:2 * hidden], gn[2 * hidden:3 * hidden],
                       gn[3 * hidden:], dgn[:hidden], dgn[hidden:2 * hidden],
                       dgn[2 * hidden:3 * hidden], dgn[3 * hidden:], tanh_c[n], c_prev[n],
                       dh[n], dc[n], gy[n])


_F32 = np.dtype(np.float32)


def check_cell_arrays(where, wide, narrow):
    """What the step kernels rely on (they index without bounds checks): float32 NumPy
    arrays (the upstream gradient ``gy`` may be any float), each of ``narrow`` (name,
    array) pairs (B, H) like the first, each of ``wide`` (B, 4H).  TypeError for a kind or
    dtype, ValueError for a shape, naming the array.  Called once per time step, so the
    common case is a few identity and tuple comparisons."""
    shape = getattr(narrow[0][1], "shape", None)
    if shape is not None and len(shape) == 2:
        big = (shape[0], 4 * shape[1])
        if all(type(a) is np.ndarray and a.dtype is _F32 and a.shape == big
               for _, a in wide) and all(type(a) is np.ndarray and a.dtype is _F32
                                         and a.shape == shape for _, a in narrow):
            return
    _check_cell_slowly(where, wide, narrow)


def _check_cell_slowly(where, wide, narrow):
    """``check_cell_arrays`` one array at a time, to name the one that is wrong."""
    first_name, first = narrow[0]
    if getattr(first, "ndim", None) != 2:
        raise ValueError(f"{where}: {first_name} must be a 2-D (B, H) array, got shape "
                         f"{getattr(first, 'shape', type(first).__name__)}")
    rows, hidden = first.shape
    for (name, a), shape in [(w, (rows, 4 * hidden)) for w in wide] + \
            [(n, (rows, hidden)) for n in narrow]:
        if not isinstance(a, np.ndarray) or a.dtype != np.float32 and (
                name != "gy" or a.dtype.kind != "f"):
            raise TypeError(f"{where}: {name} must be a float32 NumPy array, got "
                            f"{getattr(a, 'dtype', type(a).__name__)}")
        if a.shape != shape:
            raise ValueError(f"{where}: {name} must have shape {shape} (B = {rows}, H = "
                             f"{hidden} from {first_name}), got {a.shape}")


def lstm_cell_numba(g, hw, c, c_prev, tanh_c, y, h, h_prev):
    """``lstm_cell_ref`` as one float32 Numba pass (same arguments, same effects)."""
    check_cell_arrays("lstm_cell_numba", [("g", g), ("hw", hw)],
                      [("c", c), ("c_prev", c_prev), ("tanh_c", tanh_c), ("y", y), ("h", h),
                       ("h_prev", h_prev)])
    _cell(g, hw, c, c_prev, tanh_c, y, h, h_prev)


def lstm_cell_grad_numba(g, tanh_c, c_prev, gy, dh, dc, dg):
    """``lstm_cell_grad_ref`` as one float32 Numba pass (same arguments, same effects)."""
    check_cell_arrays("lstm_cell_grad_numba", [("g", g), ("dg", dg)],
                      [("dh", dh), ("tanh_c", tanh_c), ("c_prev", c_prev), ("gy", gy),
                       ("dc", dc)])
    _cell_grad(g, tanh_c, c_prev, gy, dh, dc, dg)


# ----- dispatch --------------------------------------------------------------------------------

def pick(like):
    """The (forward step, backward step) pair for arrays like ``like``: the kernels for
    float32 NumPy arrays where ``enabled``, else the references.  A layer picks once per
    call, not once per time step."""
    if like.dtype == np.float32 and enabled(like):
        return lstm_cell_numba, lstm_cell_grad_numba
    return lstm_cell_ref, lstm_cell_grad_ref


def lstm_cell(g, hw, c, c_prev, tanh_c, y, h, h_prev):
    """One forward step of the LSTM layer, in place (see ``lstm_cell_ref``)."""
    pick(g)[0](g, hw, c, c_prev, tanh_c, y, h, h_prev)


def lstm_cell_grad(g, tanh_c, c_prev, gy, dh, dc, dg):
    """One backward step of the LSTM layer, in place (see ``lstm_cell_grad_ref``)."""
    pick(g)[1](g, tanh_c, c_prev, gy, dh, dc, dg)
