"""The LSTM layer's time loop on several threads, split over the hidden units.

A step of the LSTM layer is a (B, H) @ (H, 4H) product and then elementwise work per
hidden unit.  BLAS threads the product alone, and waking its threads for every step and
letting them sleep through the elementwise work cost more than it saved
(docs/performance.md).  Here the hidden units are cut into one contiguous chunk per
thread, and each thread does everything for its chunk: its gate rows of the product (a
single-threaded ``cblas_sgemm``, ``lezero.runtime.openblas``) and the cell update.  The
chunks run on the runtime's threads (``run_meeting``) and meet once per step
(``arrive_and_wait``: the next product needs every chunk of ``h``; a late partner is
waited for asleep, not spinning).

* forward: chunk ``k`` owns hidden units ``j0:j1``.  Its recurrent weights are the rows
  ``q*H + j0 : q*H + j1`` of ``w_hh`` for the four gates ``q``, copied once per call
  into ``w_parts[k]`` (4*(j1-j0), H), so its product is one GEMM into its own scratch.
  ``h`` is double-buffered (``hbuf[t % 2]`` is read, the other written) because every
  thread reads all of it while the others write their chunks.
* backward: step ``t``'s gradient to ``h`` is ``d_t @ w_hh``, whose columns ``j0:j1``
  need every column of ``d_t``: chunk ``k`` computes its columns from ``d`` of the step
  done in the previous region, then runs the cell's backward for its units, writing
  their gate columns of ``d`` for this step (other rows than those being read).

Everything else (layouts, saved arrays, packed batches where only the first ``bs`` rows
advance) is as in the serial loop of ``LSTMLayer``; ``lezero.kernels.lstm`` holds the
row functions both use, so the two paths compute the same numbers in the same order.
"""
import numpy as np

from lezero.kernels import enabled, jit
from lezero.kernels.fastexp import FAST
from lezero.kernels.lstm import _cell_grad_row, _cell_row, check_cell_arrays
from lezero.runtime import (NO_TRANS, ROW_MAJOR, TRANS, arrive_and_wait, policy, run_meeting,
                            sgemm, sleep_available, threads_for)


def chunks(hidden, parts):
    """``parts + 1`` bounds cutting ``hidden`` units into contiguous chunks, on multiples
    of 8 where possible (vector-aligned rows)."""
    edges = [min(hidden, 8 * round(hidden * k / parts / 8)) for k in range(parts + 1)]
    edges[-1] = hidden
    return np.array(edges, dtype=np.int64)


def parts_for(gates, w_hh, rows):
    """How many chunks the layer's steps run in (1: the serial loop): float32 NumPy
    arrays, Numba on, NumPy's ``cblas_sgemm`` and ``usleep`` found, and each chunk's
    share of a step's product at least ``policy.lstm_min_part_flops`` (one chunk per
    thread, of 16 units or more)."""
    if not (gates.dtype == w_hh.dtype == np.float32) or not enabled(gates, w_hh) \
            or sgemm() is None or not sleep_available():
        return 1
    hidden = w_hh.shape[1]
    return threads_for(hidden // 16, 2.0 * rows * hidden * 4 * hidden,
                       policy.lstm_min_part_flops)


@jit(cache=True, nogil=True, fastmath=FAST, error_model="numpy")
def _forward_part(gemm, k, meeting, spins, gates, w_part, hbuf, c, hk, c_prev, tanh_c, y,
                  h_prev, offs, sizes, bounds):
    """Chunk ``k``'s share of every step, meeting the other chunks after each."""
    hidden, parts = c.shape[1], bounds.size - 1
    j0, j1 = bounds[k], bounds[k + 1]
    m = j1 - j0
    for t in range(offs.size):
        off, bs = offs[t], sizes[t]
        src, dst = hbuf[t % 2], hbuf[1 - t % 2]
        gemm(ROW_MAJOR, NO_TRANS, TRANS, bs, 4 * m, hidden, np.float32(1.0), src.ctypes.data,
             hidden, w_part.ctypes.data, hidden, np.float32(0.0), hk.ctypes.data, 4 * m)
        for n in range(bs):
            gn, hr, r = gates[off + n], hk[n * 4 * m:(n + 1) * 4 * m], off + n
            _cell_row(gn[j0:j1], gn[hidden + j0:hidden + j1],
                      gn[2 * hidden + j0:2 * hidden + j1], gn[3 * hidden + j0:3 * hidden + j1],
                      hr[:m], hr[m:2 * m], hr[2 * m:3 * m], hr[3 * m:], c[n, j0:j1],
                      c_prev[r, j0:j1], tanh_c[r, j0:j1], y[r, j0:j1], h_prev[r, j0:j1],
                      src[n, j0:j1], dst[n, j0:j1])
        for n in range(bs, src.shape[0]):            # finished sequences keep their state
            dst[n, j0:j1] = src[n, j0:j1]
        arrive_and_wait(meeting, parts * (t + 1), spins)    # the next product reads all h


@jit(cache=True, nogil=True, fastmath=FAST, error_model="numpy")
def _backward_part(gemm, k, meeting, spins, gates, tanh_c, c_prev, gy, w_hh, dh, dc, d, offs,
                   sizes, bounds):
    """Chunk ``k``'s share of every backward step (latest first)."""
    hidden, parts, steps = dh.shape[1], bounds.size - 1, offs.size
    j0, j1 = bounds[k], bounds[k + 1]
    for r in range(steps):
        t = steps - 1 - r
        off, bs = offs[t], sizes[t]
        if r > 0:           # dh[:, j0:j1] = d of the step done last @ w_hh[:, j0:j1]
            arrive_and_wait(meeting, parts * r, spins)      # ... once every chunk wrote d
            po, pb = offs[t + 1], sizes[t + 1]
            gemm(ROW_MAJOR, NO_TRANS, NO_TRANS, pb, j1 - j0, 4 * hidden, np.float32(1.0),
                 d[po].ctypes.data, 4 * hidden, w_hh[0, j0:].ctypes.data, hidden,
                 np.float32(0.0), dh[0, j0:].ctypes.data, hidden)
        for n in range(bs):
            gn, dn, q = gates[off + n], d[off + n], off + n
            _cell_grad_row(gn[j0:j1], gn[hidden + j0:hidden + j1],
                           gn[2 * hidden + j0:2 * hidden + j1],
                           gn[3 * hidden + j0:3 * hidden + j1], dn[j0:j1],
                           dn[hidden + j0:hidden + j1], dn[2 * hidden + j0:2 * hidden + j1],
                           dn[3 * hidden + j0:3 * hidden + j1], tanh_c[q, j0:j1],
                           c_prev[q, j0:j1], dh[n, j0:j1], dc[n, j0:j1], gy[q, j0:j1])


@jit(cache=True, nogil=True)
def _add_tn(gemm, d, a, acc):
    gemm(ROW_MAJOR, TRANS, NO_TRANS, acc.shape[0], acc.shape[1], d.shape[0], np.float32(1.0),
         d.ctypes.data, d.shape[1], a.ctypes.data, a.shape[1], np.float32(1.0),
         acc.ctypes.data, acc.shape[1])


def add_tn(d, a, acc):
    """``acc += d.T @ a`` without a temporary the size of ``acc``: one BLAS product with
    beta 1 where float32 C-contiguous NumPy arrays and ``sgemm`` allow, else NumPy's.
    The LSTM layer under autocast sums its weight gradients over chunks of time steps
    this way.  ``d`` (R, M), ``a`` (R, N), ``acc`` (M, N)."""
    if not (d.ndim == a.ndim == acc.ndim == 2 and d.shape[0] == a.shape[0]
            and acc.shape == (d.shape[1], a.shape[1])):
        raise ValueError(f"lstm_parts.add_tn: need d (R, M), a (R, N), acc (M, N), got "
                         f"{d.shape}, {a.shape}, {acc.shape}")
    gemm = sgemm() if enabled(d, a, acc) else None
    if gemm is None or not all(x.dtype == np.float32 and x.flags.c_contiguous
                               for x in (d, a, acc)):
        acc += d.T @ a
    elif d.size and acc.size:
        _add_tn(gemm, d, a, acc)


def _steps(steps):
    offs = np.array([off for off, _ in steps], dtype=np.int64)
    return offs, np.array([bs for _, bs in steps], dtype=np.int64)


def _check(where, rows_like, state, w_hh, steps, parts, contiguous):
    """What the chunk kernels rely on (they index and hand raw pointers to BLAS without
    bounds checks): ``w_hh`` float32 (4H, H); ``rows_like`` (name, array) pairs, the
    first (rows, 4H) and the rest (rows, H); ``state`` (name, array) pairs (B, H); every
    step (offset, size) inside the rows with 1 <= size <= B; 1 <= parts <= H; the arrays
    named in ``contiguous`` C-contiguous."""
    if not isinstance(w_hh, np.ndarray) or w_hh.dtype != np.float32 or w_hh.ndim != 2 \
            or w_hh.shape[0] != 4 * w_hh.shape[1]:
        raise ValueError(f"{where}: w_hh must be a float32 (4H, H) array, got "
                         f"{getattr(w_hh, 'shape', type(w_hh).__name__)}")
    hidden = w_hh.shape[1]
    (wide_name, wide), narrow = rows_like[0], rows_like[1:]
    rows = wide.shape[0] if getattr(wide, "ndim", 0) == 2 else -1
    check_cell_arrays(where, [], state)
    check_cell_arrays(where, [(wide_name, wide)], narrow)
    batch, width = state[0][1].shape
    if width != hidden or narrow[0][1].shape[1] != hidden:
        raise ValueError(f"{where}: the states and saved arrays must have H = {hidden} "
                         f"columns (w_hh), got {state[0][1].shape} and {narrow[0][1].shape}")
    for off, size in steps:
        if not (1 <= size <= batch and 0 <= off and off + size <= rows):
            raise ValueError(f"{where}: step (offset {off}, size {size}) is outside the "
                             f"{rows} rows or the batch of {batch}")
    if not 1 <= parts <= hidden:
        raise ValueError(f"{where}: parts must be in [1, {hidden}], got {parts}")
    for name, a in rows_like + state + [("w_hh", w_hh)]:
        if name in contiguous and not a.flags.c_contiguous:
            raise ValueError(f"{where}: {name} must be C-contiguous")


def _weight_parts(w_hh, bounds):
    """Per chunk, its four gates' rows of ``w_hh`` stacked: (parts, 4 * widest, H)."""
    hidden = w_hh.shape[1]
    widest = int(np.max(np.diff(bounds)))
    out = np.empty((bounds.size - 1, 4 * widest, hidden), dtype=w_hh.dtype)
    for k in range(bounds.size - 1):
        j0, j1 = int(bounds[k]), int(bounds[k + 1])
        m = j1 - j0
        for q in range(4):
            out[k, q * m:(q + 1) * m] = w_hh[q * hidden + j0:q * hidden + j1]
    return out


def weight_parts(w_hh, parts):
    """``forward``'s per-chunk copy of ``w_hh``, for a caller that runs the same weights
    through several ``forward`` calls (the LSTM layer under autocast, a chunk of steps
    at a time) and would otherwise copy them once per call."""
    return _weight_parts(w_hh, chunks(w_hh.shape[1], parts))


def forward(gates, w_hh, h, c, steps, parts, saved, w_parts=None):
    """The serial loop's effects, over ``parts`` threads: ``gates`` (rows, 4H) activated
    in place; ``h`` and ``c`` (B, H) advanced to the last state; ``saved`` = (c_prev,
    tanh_c, y, h_prev), each (rows, H), filled.  ``steps``: (offset, batch size) pairs in
    the order to run them.  ``w_parts``: ``weight_parts(w_hh, parts)``, made here if None."""
    _check("lstm_parts.forward", [("gates", gates)] + list(zip(
        ("c_prev", "tanh_c", "y", "h_prev"), saved)), [("h", h), ("c", c)], w_hh, steps,
        parts, ())
    bounds = chunks(w_hh.shape[1], parts)
    hbuf = np.empty((2,) + h.shape, dtype=h.dtype)
    hbuf[0] = h
    if w_parts is None:
        w_parts = _weight_parts(w_hh, bounds)
    elif not (isinstance(w_parts, np.ndarray) and w_parts.dtype == np.float32
              and w_parts.flags.c_contiguous and w_parts.shape == (
                  parts, 4 * int(np.max(np.diff(bounds))), w_hh.shape[1])):
        raise ValueError(f"lstm_parts.forward: w_parts must be weight_parts(w_hh, {parts}), "
                         f"got {getattr(w_parts, 'shape', type(w_parts).__name__)}")
    hw = np.empty((parts, h.shape[0] * w_parts.shape[1]), dtype=h.dtype)
    offs, sizes = _steps(steps)
    gemm = sgemm()
    run_meeting(lambda k, meeting, spins: _forward_part(
        gemm, k, meeting, spins, gates, w_parts[k], hbuf, c, hw[k], *saved, offs, sizes,
        bounds), parts, ("lstm forward", gates.shape, parts))
    h[...] = hbuf[len(steps) % 2]


def backward(gates, tanh_c, c_prev, gy, w_hh, dh, dc, d, steps, parts):
    """The serial backward loop's effects but the last product: ``d`` (rows, 4H) gets the
    gate gradients, ``dh`` += the output gradients and products of every step but the
    first one run, ``dc`` the cell gradient; the caller finishes with ``dh = d_first @
    w_hh``."""
    _check("lstm_parts.backward", [("gates", gates), ("tanh_c", tanh_c), ("c_prev", c_prev),
                                   ("gy", gy)], [("dh", dh), ("dc", dc)], w_hh, steps, parts,
           ("w_hh", "dh"))
    check_cell_arrays("lstm_parts.backward", [("d", d)], [("tanh_c", tanh_c)])
    if not d.flags.c_contiguous:
        raise ValueError("lstm_parts.backward: d must be C-contiguous")
    offs, sizes = _steps(steps)
    bounds = chunks(w_hh.shape[1], parts)
    gemm = sgemm()
    run_meeting(lambda k, meeting, spins: _backward_part(
        gemm, k, meeting, spins, gates, tanh_c, c_prev, gy, w_hh, dh, dc, d, offs, sizes,
        bounds), parts, ("lstm backward", gates.shape, parts))
