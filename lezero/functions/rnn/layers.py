"""Fused recurrent layers: one layer, one direction, a whole (packed) sequence per call.

Each layer is one ``Function`` whose forward loops over time on raw arrays and whose
backward is hand-written backpropagation through time, also on raw arrays.  That is
what makes an LSTM training step cost about what PyTorch's fused kernel costs:

* the input projection of every step is one big matrix product before the loop, and
  the weight gradients are one big product each after the backward loop;
* inside the loop only the (rows, H) @ (H, gates * H) recurrent product and a few
  in-place elementwise updates run, on buffers allocated once per call.

Layout: the sequence comes packed (``rnn_packed``): ``x`` is (sum of batch sizes, I),
time step ``t`` being rows ``offsets[t]:offsets[t] + batch_sizes[t]``.  A padded
(T, N, I) batch is the special case ``batch_sizes = [N] * T``.  At step ``t`` only the
first ``batch_sizes[t]`` rows of the state advance, so sequences that have ended keep
their last state (which becomes ``h_n``) and no work is done on padding; running the
steps in reverse order gives the backward direction of a bidirectional layer with the
same rule.  Gate order and weight layout are PyTorch's (LSTM i, f, g, o; GRU r, z, n).

Under autocast on NumPy (float16 or bfloat16 emulated: ``amp/emulate.py``) the LSTM
computes in float32 but keeps what its backward reads in the low dtype, and never holds a
float32 array of every time step: it runs about ``AMP_CHUNKS`` chunks of consecutive
steps, each with its input projection and saved arrays in float32 scratch rounded into the
low-precision arrays once the chunk is done; its backward goes chunk by chunk in reverse,
summing the weight gradients over the chunks.

The first-order gradient is exact.  These layers are not twice differentiable: when a
graph of the gradient is recorded (``create_graph=True``), differentiating it again
through a fused layer raises an error instead of silently giving zero.
"""
import numpy as np

from lezero.core import Function
from lezero.functions.common import xp_of
from lezero.kernels import lstm as lstm_kernels
from lezero.kernels import lstm_parts
from lezero.runtime.blas import is_small, matmul as blas_matmul, matmul_nd, one_blas_thread


class _Recurrence(Function):
    """Base of the fused layers.  Inputs: ``x, h0, [c0], w_ih, w_hh, [b_ih, b_hh]``;
    outputs: ``y, h_n, [c_n]``.  Subclasses implement ``run`` and ``bptt``."""

    name = "rnn"
    has_cell = False

    gates = 1

    def __init__(self, batch_sizes, reverse=False):
        sizes = [int(b) for b in batch_sizes]
        if not sizes or min(sizes) < 1:
            raise ValueError(f"{self.name}: batch_sizes must be a non-empty list of positive "
                             f"ints, got {sizes if len(sizes) <= 20 else len(sizes)}")
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(int)
        steps = [(int(offsets[t]), sizes[t]) for t in range(len(sizes))]
        self.steps = steps[::-1] if reverse else steps

    def forward(self, *arrays):
        n_state = 2 if self.has_cell else 1
        x, states = arrays[0], arrays[1:1 + n_state]
        w_ih, w_hh, *bias = arrays[1 + n_state:]
        self._check_arrays(x, states, w_ih, w_hh, bias)
        return self.run(xp_of(x), x, states, w_ih, w_hh, bias[0] if bias else None,
                        bias[1] if bias else None)

    def _check_arrays(self, x, states, w_ih, w_hh, bias):
        """What the time loop (and its kernels, which read without bounds checks) relies
        on, from ``steps`` itself (however this Function was built): every step's rows
        inside x, its size at most the state's rows; x (sum of batch sizes, I); each state
        (B, H); w_ih (gates*H, I), w_hh (gates*H, H), biases (gates*H,)."""
        rows, widest = sum(bs for _, bs in self.steps), max(bs for _, bs in self.steps)
        batch = states[0].shape[0] if states[0].ndim == 2 else -1
        for off, bs in self.steps:
            if not (0 <= off and 1 <= bs <= batch and off + bs <= x.shape[0]):
                raise ValueError(f"{self.name}: time step (offset {off}, batch size {bs}) "
                                 f"does not fit x of shape {x.shape} and a state of "
                                 f"{batch} rows")
        hidden = w_hh.shape[-1] if w_hh.ndim == 2 else -1
        width = self.gates * hidden
        want = {"x": (rows, x.shape[-1]), "w_ih": (width, x.shape[-1]),
                "w_hh": (width, hidden)}
        got = {"x": x.shape, "w_ih": w_ih.shape, "w_hh": w_hh.shape}
        for k, b in enumerate(bias):
            want[f"bias {k}"], got[f"bias {k}"] = (width,), b.shape
        for k, h in enumerate(states):
            want[f"state {k}"], got[f"state {k}"] = (batch, hidden), h.shape
        for key, shape in want.items():
            if x.ndim != 2 or tuple(got[key]) != shape:
                raise ValueError(f"{self.name}: {key} must have shape {shape} (batch_sizes "
                                 f"sum to {rows}, the widest step is {widest}), got "
                                 f"{tuple(got[key])}")

    def backward(self, *gys):
        # create_graph: record a node that refuses to be differentiated again.
        grads = _RecurrenceGrad(self)(*gys, *self.inputs)
        return tuple(g if need else None for g, need in zip(grads, self.needs_input_grad))

    def backward_arrays(self, *gys):
        return tuple(self.gradients(list(gys)))

    def gradients(self, gys):
        """Raw-array gradients of every input (None where not needed)."""
        need = self.needs_input_grad
        x, *rest = [v.data for v in self.inputs]
        n_state = 2 if self.has_cell else 1
        w_ih, w_hh = rest[n_state], rest[n_state + 1]
        has_bias = len(rest) > n_state + 2
        rows = max(bs for _, bs in self.steps)     # the recurrent products are small
        with one_blas_thread(is_small(rows, w_hh.shape[1], w_hh.shape[0])):
            d_in, d_rec, d_states = self.bptt(xp_of(x), gys, w_hh)
        dx = blas_matmul(d_in, w_ih) if need[0] else None
        n_w = 1 + n_state
        dw_ih = blas_matmul(d_in.T, x) if need[n_w] else None
        dw_hh = blas_matmul(d_rec.T, self.h_prev) if need[n_w + 1] else None
        grads = [dx, *d_states, dw_ih, dw_hh]
        if has_bias:
            want_ih, want_hh = need[n_w + 2], need[n_w + 3]
            shared = d_rec is d_in            # LSTM, Elman: both biases get the same sum
            db_ih = d_in.sum(axis=0) if want_ih or (want_hh and shared) else None
            db_hh = (db_ih if shared else d_rec.sum(axis=0)) if want_hh else None
            grads += [db_ih if want_ih else None, db_hh]
        return grads


class _RecurrenceGrad(Function):
    """The gradient of a fused layer as a graph node (recorded under create_graph).
    Its inputs tie it to the layer's inputs; differentiating it raises."""

    def __init__(self, layer):
        self.layer = layer

    def forward(self, *arrays):
        n_out = 3 if self.layer.has_cell else 2
        grads = self.layer.gradients(list(arrays[:n_out]))
        xp = xp_of(arrays[0])
        return tuple(xp.zeros(0, arrays[0].dtype) if g is None else g for g in grads)

    def backward(self, *ggs):
        raise NotImplementedError(
            f"{self.layer.name}: the fused layer's gradient is not differentiable (no double "
            "backward); build the recurrence from the cells (lstm_cell, gru_cell, "
            "rnn_tanh_cell) to differentiate twice")


class LSTMLayer(_Recurrence):
    """Fused LSTM: i, f, g, o gates; c' = f c + i g; h' = o tanh(c')."""

    name = "lstm"
    has_cell = True
    gates = 4
    # Under the emulation it keeps its saved arrays low itself, rounded a chunk of steps at
    # a time (_run_low), and lifts its low inputs itself: float32 arrays of every step
    # beside their rounded copies made autocast's step peak higher than float32's.
    amp_saves_low = True
    amp_saved_dtype = None          # set per instance by the emulation

    def run(self, xp, x, states, w_ih, w_hh, b_ih, b_hh):
        h, c = (s.copy() for s in states)
        bias = None if b_ih is None else b_ih + b_hh
        if self.amp_saved_dtype is not None:
            return (self._run_low(xp, x, w_ih, w_hh, bias, h, c), h, c)
        hidden = w_hh.shape[1]
        gates = blas_matmul(x, w_ih.T)          # every step's input projection at once
        if bias is not None:
            gates += bias
        y = xp.empty((x.shape[0], hidden), dtype=x.dtype)
        tanh_c, self.h_prev, self.c_prev = xp.empty_like(y), xp.empty_like(y), xp.empty_like(y)
        self.parts = lstm_parts.parts_for(gates, w_hh, h.shape[0])
        self._loop(xp, gates, w_hh, h, c, (self.c_prev, tanh_c, y, self.h_prev), self.steps)
        self.gates, self.tanh_c = gates, tanh_c
        return y, h, c

    def _loop(self, xp, gates, w_hh, h, c, saved, steps, w_parts=None):
        """Run ``steps`` over rows of ``gates`` and ``saved`` = (c_prev, tanh_c, y,
        h_prev): on ``self.parts`` threads (``w_parts``: see lstm_parts.forward), or on
        this one."""
        if self.parts > 1:
            lstm_parts.forward(gates, w_hh, h, c, steps, self.parts, saved, w_parts)
        else:
            self._run_serial(xp, gates, w_hh, h, c, saved, steps)

    @staticmethod
    def _run_serial(xp, gates, w_hh, h, c, saved, steps):
        """The time loop on this thread (BLAS threads the small products, or not)."""
        hidden = w_hh.shape[1]
        hw = xp.empty((h.shape[0], 4 * hidden), dtype=gates.dtype)     # h @ W_hh^T, per step
        cell = lstm_kernels.pick(gates)[0]
        w_hh_t = w_hh.T
        c_prev, tanh_c, y, h_prev = saved
        with one_blas_thread(is_small(h.shape[0], hidden, w_hh.shape[0])):
            for off, bs in steps:
                sl = slice(off, off + bs)
                matmul_nd(xp, h[:bs], w_hh_t, out=hw[:bs])
                cell(gates[sl], hw[:bs], c[:bs], c_prev[sl], tanh_c[sl], y[sl], h[:bs],
                     h_prev[sl])

    def _run_low(self, xp, x, w_ih, w_hh, bias, h, c):
        """The forward under the emulation: float32 arithmetic on a chunk of steps at a
        time (its input projection and saved arrays in float32 scratch), each chunk rounded
        into the low-dtype saved arrays and output as soon as it is done.  Returns y."""
        low, (rows, hidden) = self.amp_saved_dtype, (x.shape[0], w_hh.shape[1])
        spans = _spans(self.steps)
        widest = max(r1 - r0 for r0, r1, _ in spans)
        g_buf = xp.empty((widest, 4 * hidden), dtype=x.dtype)
        s_buf = xp.empty((4, widest, hidden), dtype=x.dtype)
        self.gates = xp.empty((rows, 4 * hidden), dtype=low)
        kept = [xp.empty((rows, hidden), dtype=low) for _ in range(4)]
        self.parts = lstm_parts.parts_for(g_buf, w_hh, h.shape[0])
        w_parts = lstm_parts.weight_parts(w_hh, self.parts) if self.parts > 1 else None
        for r0, r1, steps in spans:
            gates, saved = g_buf[:r1 - r0], tuple(a[:r1 - r0] for a in s_buf)
            with one_blas_thread(is_small(r1 - r0, x.shape[1], 4 * hidden)):
                matmul_nd(xp, x[r0:r1], w_ih.T, out=gates)
            if bias is not None:
                gates += bias
            self._loop(xp, gates, w_hh, h, c, saved, steps, w_parts)
            for dst, src in zip([self.gates] + kept, (gates,) + saved):
                dst[r0:r1] = _round(src, low)
        self.c_prev, self.tanh_c, y, self.h_prev = kept
        return y

    def gradients(self, gys):
        if self.amp_saved_dtype is not None:
            return self._gradients_low(gys)
        return super().gradients(gys)

    def bptt(self, xp, gys, w_hh):
        gy, gh, gc = gys
        d = xp.empty(self.gates.shape, dtype=gy.dtype)
        dh, dc = gh.copy(), gc.copy()
        if self.parts > 1 and self.gates.dtype == d.dtype:
            gy, w_hh = np.ascontiguousarray(gy), np.ascontiguousarray(w_hh)
            lstm_parts.backward(self.gates, self.tanh_c, self.c_prev, gy, w_hh, dh, dc, d,
                                self.steps, self.parts)
            off, bs = self.steps[0]
            matmul_nd(xp, d[off:off + bs], w_hh, out=dh[:bs])
            return d, d, (dh, dc)
        cell_grad = lstm_kernels.pick(d)[1]
        for off, bs in reversed(self.steps):
            sl = slice(off, off + bs)
            cell_grad(self.gates[sl], self.tanh_c[sl], self.c_prev[sl], gy[sl], dh[:bs],
                      dc[:bs], d[sl])
            matmul_nd(xp, d[sl], w_hh, out=dh[:bs])
        return d, d, (dh, dc)

    def _gradients_low(self, gys):
        """``gradients`` after ``_run_low``: backpropagation through time a chunk of steps
        at a time, in reverse, on float32 scratch for the chunk's gate gradients.  The
        saved arrays, upstream gradients and x are lifted from the low dtype a step or a
        chunk at a time; each chunk's share of dx and of the weight gradients is taken
        before the next chunk."""
        need = self.needs_input_grad
        x, _, _, w_ih, w_hh, *bias = [v.data for v in self.inputs]
        xp, w_ih, w_hh = xp_of(x), _lift(w_ih), _lift(w_hh)
        gy, gh, gc = gys
        dh, dc = gh.astype(np.float32), gc.astype(np.float32)
        spans = _spans(self.steps)
        d_buf = xp.empty((max(r1 - r0 for r0, r1, _ in spans), w_hh.shape[0]), np.float32)
        dx = xp.empty(x.shape, dtype=x.dtype) if need[0] else None     # (x's dtype)
        sums = _WeightSums(xp, w_ih, w_hh, need[3], need[4],
                           bool(bias) and (need[5] or need[6]))
        for r0, r1, steps in reversed(spans):
            d = d_buf[:r1 - r0]
            self._bptt_low(xp, gy, w_hh, dh, dc, d, r0, steps)
            with one_blas_thread(is_small(r1 - r0, w_hh.shape[0], max(x.shape[1],
                                                                     w_hh.shape[1]))):
                if dx is not None:
                    dx[r0:r1] = _round(blas_matmul(d, w_ih), x.dtype)
                sums.add(d, _lift(x[r0:r1]), _lift(self.h_prev[r0:r1]))
        grads = [dx, dh, dc, sums.w_ih, sums.w_hh]
        if bias:
            grads += [sums.b if need[5] else None, sums.b if need[6] else None]
        return grads

    def _bptt_low(self, xp, gy, w_hh, dh, dc, d, r0, steps):
        """One chunk's steps (rows from ``r0``) of the backward loop, latest first, into
        its gate gradients ``d``; the saved arrays and ``gy`` lifted a step at a time."""
        cell_grad = lstm_kernels.pick(d)[1]
        widest = max(bs for _, bs in steps)         # the recurrent products are small
        with one_blas_thread(is_small(widest, w_hh.shape[1], w_hh.shape[0])):
            for off, bs in reversed(steps):
                sl = slice(r0 + off, r0 + off + bs)
                cell_grad(*[_lift(a[sl]) for a in (self.gates, self.tanh_c, self.c_prev, gy)],
                          dh[:bs], dc[:bs], d[off:off + bs])
                matmul_nd(xp, d[off:off + bs], w_hh, out=dh[:bs])


def _round(a, dtype):
    """float32 ``a`` in ``dtype``, rounded as the emulation rounds (itself if float32)."""
    if dtype == np.float32:
        return a
    from lezero.amp.convert import convert
    return convert(a, dtype)


def _lift(a):
    """``a`` in float32 (itself if it is)."""
    return a.astype(np.float32, copy=False)


# Under the emulation the LSTM runs its steps in about this many chunks of rows: its
# float32 scratch is that fraction of the all-steps arrays it replaces.
AMP_CHUNKS = 8


def _spans(steps):
    """``steps`` (offset, size), in running order, cut into about ``AMP_CHUNKS`` runs of
    consecutive steps: (first row, end row, the run's steps with offsets from its first
    row).  Consecutive steps, forward or reversed, cover a contiguous block of rows."""
    target = -(-sum(bs for _, bs in steps) // AMP_CHUNKS)
    spans, run, count = [], [], 0
    for k, step in enumerate(steps):
        run.append(step)
        count += step[1]
        if count >= target or k == len(steps) - 1:
            r0 = min(off for off, _ in run)
            spans.append((r0, r0 + count, [(off - r0, bs) for off, bs in run]))
            run, count = [], 0
    return spans


class _WeightSums:
    """The weight and bias gradients of the LSTM summed over chunks of rows (float32)."""

    def __init__(self, xp, w_ih, w_hh, want_ih, want_hh, want_b):
        self.w_ih = xp.zeros(w_ih.shape, dtype=np.float32) if want_ih else None
        self.w_hh = xp.zeros(w_hh.shape, dtype=np.float32) if want_hh else None
        self.b = xp.zeros(w_hh.shape[0], dtype=np.float32) if want_b else None

    def add(self, d, x, h_prev):
        """One chunk: its gate gradients ``d``, inputs ``x`` and ``h_prev`` rows."""
        if self.b is not None:
            self.b += d.sum(axis=0)
        for acc, a in ((self.w_ih, x), (self.w_hh, h_prev)):
            if acc is not None:
                lstm_parts.add_tn(d, a, acc)     # no (4H, .) temporary per chunk


class GRULayer(_Recurrence):
    """Fused GRU: r, z, n gates; n = tanh(W_in x + b_in + r (W_hn h + b_hn));
    h' = (1 - z) n + z h."""

    name = "gru"
    gates = 3

    def run(self, xp, x, states, w_ih, w_hh, b_ih, b_hh):
        (h0,) = states
        hidden = w_hh.shape[1]
        two = 2 * hidden
        acts = blas_matmul(x, w_ih.T)
        if b_ih is not None:
            acts += b_ih
        y = xp.empty((x.shape[0], hidden), dtype=x.dtype)
        self.h_prev = xp.empty_like(y)
        self.hn = xp.empty_like(y)              # W_hn h + b_hn, needed by the backward
        h = h0.copy()
        w_hh_t = w_hh.T
        for off, bs in self.steps:
            sl = slice(off, off + bs)
            hp = h[:bs]
            self.h_prev[sl] = hp
            hw = blas_matmul(hp, w_hh_t)
            if b_hh is not None:
                hw += b_hh
            a = acts[sl]
            a[:, :two] += hw[:, :two]
            lstm_kernels.sigmoid_inplace(xp, a[:, :two])
            self.hn[sl] = hw[:, two:]
            n = a[:, two:]
            n += a[:, :hidden] * hw[:, two:]
            xp.tanh(n, out=n)
            # h' = n + z (h - n)
            yb = y[sl]
            xp.subtract(hp, n, out=yb)
            yb *= a[:, hidden:two]
            yb += n
            h[:bs] = yb
        self.acts = acts
        return y, h

    def bptt(self, xp, gys, w_hh):
        gy, gh = gys
        hidden = w_hh.shape[1]
        two = 2 * hidden
        acts, h_prev, hn = self.acts, self.h_prev, self.hn
        d_in = xp.empty_like(acts)
        d_rec = xp.empty_like(acts)
        dh = gh.copy()
        for off, bs in reversed(self.steps):
            sl = slice(off, off + bs)
            a, di, dr = acts[sl], d_in[sl], d_rec[sl]
            r, z, n = a[:, :hidden], a[:, hidden:two], a[:, two:]
            dhb = dh[:bs]
            dhb += gy[sl]
            # d n (through tanh): dh (1 - z) (1 - n^2)
            xp.multiply(dhb, 1 - z, out=di[:, two:])
            di[:, two:] *= 1 - n * n
            # d z (through sigmoid): dh (h - n) z (1 - z)
            xp.subtract(h_prev[sl], n, out=di[:, hidden:two])
            di[:, hidden:two] *= dhb
            di[:, hidden:two] *= z - z * z
            # d r (through sigmoid): dn (W_hn h + b_hn) r (1 - r)
            xp.multiply(di[:, two:], hn[sl], out=di[:, :hidden])
            di[:, :hidden] *= r - r * r
            dr[:, :two] = di[:, :two]
            xp.multiply(di[:, two:], r, out=dr[:, two:])
            dhb *= z
            dhb += blas_matmul(dr, w_hh)
        return d_in, d_rec, (dh,)


class ElmanLayer(_Recurrence):
    """Fused Elman RNN: h' = act(W_ih x + b_ih + W_hh h + b_hh), act tanh or relu."""

    def __init__(self, batch_sizes, reverse=False, nonlinearity="tanh"):
        super().__init__(batch_sizes, reverse)
        self.relu = nonlinearity == "relu"
        self.name = "rnn_relu" if self.relu else "rnn_tanh"

    def run(self, xp, x, states, w_ih, w_hh, b_ih, b_hh):
        (h0,) = states
        y = blas_matmul(x, w_ih.T)
        if b_ih is not None:
            y += b_ih + b_hh
        self.h_prev = xp.empty_like(y)
        h = h0.copy()
        w_hh_t = w_hh.T
        for off, bs in self.steps:
            sl = slice(off, off + bs)
            self.h_prev[sl] = h[:bs]
            yb = y[sl]
            yb += blas_matmul(h[:bs], w_hh_t)
            if self.relu:
                xp.maximum(yb, 0, out=yb)
            else:
                xp.tanh(yb, out=yb)
            h[:bs] = yb
        self.y = y
        return y, h

    def bptt(self, xp, gys, w_hh):
        gy, gh = gys
        d = xp.empty_like(self.y)
        dh = gh.copy()
        for off, bs in reversed(self.steps):
            sl = slice(off, off + bs)
            yb, db = self.y[sl], d[sl]
            xp.add(dh[:bs], gy[sl], out=db)
            if self.relu:
                db *= yb > 0
            else:
                db *= 1 - yb * yb
            dh[:bs] = blas_matmul(db, w_hh)
        return d, d, (dh,)
