"""Under autocast (NumPy's float16 emulation) the fused LSTM keeps its saved arrays in the
low dtype from the start: it runs a chunk of time steps at a time in float32 scratch and
rounds each chunk as it is done (``LSTMLayer.amp_saves_low``), and its backward lifts
them a step (or a chunk) at a time.  The chunking changes nothing but the order in which
the weight gradients are summed in float32, and the rows of the input product: a BLAS
whose rows round by the product's row count (OpenBLAS; MKL's do not) moves a rare output
by an ulp of float16."""
import numpy as np
import pytest

import lezero as lz
from lezero import amp, kernels, nn, runtime
from lezero.functions.rnn import layers
from lezero.functions.rnn.layers import LSTMLayer
from lezero.runtime import policy

T, B, I, H = 12, 4, 8, 16


def _direct(dtype="float16"):
    """One LSTMLayer called on its own under autocast: (the Function, y, its inputs)."""
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s).astype(np.float32) * 0.5 for s in
              [(T * B, I), (B, H), (B, H), (4 * H, I), (4 * H, H), (4 * H,), (4 * H,)]]
    xs = [lz.Variable(a) for a in arrays]
    f = LSTMLayer([B] * T)
    with amp.autocast(dtype):
        y, _, _ = f(*xs)
    return f, y, xs


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_the_saved_arrays_are_low_and_no_float32_copy_of_them_is_kept(dtype):
    f, y, _ = _direct(dtype)
    assert f.amp_saved_dtype == np.dtype(y.dtype) and y.dtype.itemsize == 2
    state = vars(f)
    for name in ("gates", "tanh_c", "c_prev", "h_prev"):
        assert state[name].dtype == y.dtype, name
    big = [k for k, v in state.items() if isinstance(v, np.ndarray)
           and v.dtype == np.float32 and v.size >= T * B * H]
    assert big == [] and "_amp_rounded" not in state


def test_the_float32_path_keeps_float32_gates_of_every_step():
    rng = np.random.default_rng(0)
    xs = [lz.Variable(rng.standard_normal(s).astype(np.float32)) for s in
          [(T * B, I), (B, H), (B, H), (4 * H, I), (4 * H, H)]]
    f = LSTMLayer([B] * T)
    f(*xs)
    assert f.amp_saved_dtype is None and "amp_saved_dtype" not in vars(f)
    assert f.gates.dtype == np.float32 and f.gates.shape == (T * B, 4 * H)


def _grads(monkeypatch, chunks, lstm_kw=None, threads=1, lengths=None, hidden=H):
    monkeypatch.setattr(layers, "AMP_CHUNKS", chunks)
    lz.manual_seed(0)
    lstm = nn.LSTM(I, hidden, **(lstm_kw or {}))
    x = lz.Variable(np.random.default_rng(1).standard_normal((T, B, I)).astype(np.float32))
    with lz.using_config("conv_threads", threads), amp.autocast("float16"):
        inp = x if lengths is None else nn.utils.rnn.pack_padded_sequence(
            x, lengths, enforce_sorted=False)
        out, (h, c) = lstm(inp)
        y = out if lengths is None else out.data
        loss = (y * y).sum() + (h * h).sum() * 2.0 + (c * c).sum() * 3.0
    with lz.using_config("conv_threads", threads):
        loss.backward()
    return [y.data, h.data, c.data, x.grad.data] + [p.grad.data for p in lstm.parameters()]


def _close(got, want, ulps=2):
    """Equal but for rare one-ulp roundings of float16 (the float32 sums' order)."""
    for g, w in zip(got, want):
        g, w = np.asarray(g, np.float64), np.asarray(w, np.float64)
        np.testing.assert_allclose(g, w, rtol=ulps * 2.0 ** -11, atol=1e-3 * np.abs(w).max())
        assert np.mean(g != w) < 0.02


@pytest.mark.parametrize("kw,lengths", [({}, None), ({"num_layers": 2}, None),
                                        ({"bidirectional": True}, [12, 9, 9, 3])])
def test_chunking_changes_neither_outputs_nor_gradients(monkeypatch, kw, lengths):
    whole = _grads(monkeypatch, 1, kw, lengths=lengths)       # one chunk: every step at once
    for chunks in (3, 8, 100):
        got = _grads(monkeypatch, chunks, kw, lengths=lengths)
        _close(got[:3], whole[:3])                             # y, h_n, c_n: per row
        _close(got[3:], whole[3:])


@pytest.mark.skipif(not kernels.numba_available(), reason="needs Numba")
def test_the_threaded_loop_gives_the_serial_loop_s_results_under_autocast(monkeypatch):
    kw = {"bidirectional": True}
    serial = _grads(monkeypatch, 4, kw, threads=1, hidden=32)
    calls = []
    real = layers.lstm_parts.forward
    monkeypatch.setattr(layers.lstm_parts, "forward",
                        lambda *a: calls.append(a[-1] is not None) or real(*a))
    profile = runtime.policy.profile
    runtime.use_profile("default")              # (LEZERO_PROFILE=serial would not split)
    try:
        with policy.using(lstm_min_part_flops=1):
            split = _grads(monkeypatch, 4, kw, threads=2, hidden=32)
    finally:
        runtime.use_profile(profile)
    assert len(calls) == 2 * 4 and all(calls)     # per chunk, weights prepared once a call
    _close(split, serial)


def _step(module, x, dtype):
    """Forward (under autocast unless ``dtype`` is None), a loss over every output,
    backward: the outputs and every gradient."""
    with amp.autocast(dtype or "float16", enabled=dtype is not None):
        out, state = module(x)
        states = state if isinstance(state, tuple) else (state,)
        loss = (out * out).sum()
        for k, s in enumerate(states):
            loss = loss + (s * s).sum() * (2.0 + k)
    loss.backward()
    return [out.data] + [s.data for s in states] + [x.grad.data] + [
        p.grad.data for p in module.parameters()]


@pytest.mark.parametrize("kind,dtype", [("LSTM", "float16"), ("LSTM", "bfloat16"),
                                        ("GRU", "float16")])
def test_autocast_gradients_stay_near_float32(kind, dtype):
    got = {}
    for run in (dtype, None):
        lz.manual_seed(0)
        module = getattr(nn, kind)(I, H, num_layers=2, bidirectional=True)
        x = lz.Variable(np.random.default_rng(1).standard_normal((T, B, I)).astype(np.float32))
        got[run] = _step(module, x, run)
    tol = 2e-2 if dtype == "float16" else 8e-2
    for g, w in zip(got[dtype], got[None]):
        assert np.linalg.norm(np.asarray(g, np.float64) - w) <= tol * np.linalg.norm(w)


def test_retain_graph_and_create_graph_give_the_same_first_order_gradients():
    _, y, xs = _direct()
    loss = (y * y).sum()
    loss.backward(retain_graph=True)
    once = [x.grad.data.copy() for x in xs]
    for x in xs:
        x.grad = None
    loss.backward()                                # the saved arrays were not used up
    again = [x.grad.data for x in xs]
    _, y, xs = _direct()
    (y * y).sum().backward(create_graph=True)
    for a, b, c in zip(once, again, [x.grad.data for x in xs]):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, c)


if __name__ == "__main__":
    pytest.main([__file__])
