"""Recurrence: cells, fused sequence layers, packed sequences (vs PyTorch and numbers)."""
import numpy as np
import pytest
import torch

import lezero as lz
import lezero.functions as F
from lezero.testing import check_all, check_double_backward, check_gradient, check_torch, rand

N, I, H, T = 2, 3, 4, 4
CELL_GATES = {"lstm_cell": 4, "gru_cell": 3, "rnn_tanh_cell": 1, "rnn_relu_cell": 1}


def _weights(gates, n_in, seed, bias=True):
    ws = [rand(gates * H, n_in, seed=seed), rand(gates * H, H, seed=seed + 1)]
    if bias:
        ws += [rand(gates * H, seed=seed + 2), rand(gates * H, seed=seed + 3)]
    return ws


@pytest.mark.parametrize("name", list(CELL_GATES))
@pytest.mark.parametrize("bias", [True, False])
def test_cells_match_torch_and_numbers(name, bias):
    lz_cell, t_cell = getattr(F, name), getattr(torch, name)
    x, h = rand(N, I, seed=1), rand(N, H, seed=2)
    ws = _weights(CELL_GATES[name], I, seed=3, bias=bias)
    if name == "lstm_cell":
        c = rand(N, H, seed=9)
        check_all(lambda *a: lz_cell(*a), lambda x, h, c, *w: t_cell(x, (h, c), *w),
                  x, h, c, *ws)
    else:
        check_all(lambda *a: lz_cell(*a), lambda x, h, *w: t_cell(x, h, *w), x, h, *ws)


@pytest.mark.parametrize("bias", [True, False])
def test_lstm_cell_takes_the_state_as_a_tuple_like_torch(bias):
    x, h, c = rand(N, I, seed=1), rand(N, H, seed=2), rand(N, H, seed=9)
    ws = _weights(4, I, seed=3, bias=bias)
    check_all(lambda x, h, c, *w: F.lstm_cell(x, (h, c), *w),
              lambda x, h, c, *w: torch.lstm_cell(x, (h, c), *w), x, h, c, *ws)
    # the older form (states as two arguments) gives the very same numbers
    new = F.lstm_cell(x, (h, c), *ws)
    old = F.lstm_cell(x, h, c, *ws)
    for a, b in zip(new, old):
        np.testing.assert_array_equal(a.data, b.data)
    # hx=None and (None, None) are zeros, in both forms
    z = np.zeros((N, H))
    for got in (F.lstm_cell(x, None, *ws), F.lstm_cell(x, (None, None), *ws),
                F.lstm_cell(x, None, None, *ws)):
        for a, b in zip(got, F.lstm_cell(x, (z, z), *ws)):
            np.testing.assert_allclose(a.data, b.data, rtol=1e-12)


def test_lstm_cell_bad_state_arguments():
    x, h = rand(N, I, seed=1), rand(N, H, seed=2)
    ws = _weights(4, I, seed=3)
    with pytest.raises(TypeError, match=r"lstm_cell: hx must be a tuple \(h, c\) or None"):
        F.lstm_cell(x, (h,), *ws)
    with pytest.raises(TypeError, match="lstm_cell: takes at most 6 positional arguments"):
        F.lstm_cell(x, (h, h), *ws, ws[-1])
    with pytest.raises(TypeError, match="lstm_cell: takes at most 7 positional arguments"):
        F.lstm_cell(x, h, h, *ws, ws[-1])


def test_cells_unbatched_and_missing_state():
    x, ws = rand(I, seed=4, dtype=np.float32), _weights(4, I, seed=5)
    ws = [w.astype(np.float32) for w in ws]
    h, c = F.lstm_cell(x, None, None, *ws)
    th, tc = torch.lstm_cell(torch.tensor(x)[None], (torch.zeros(1, H), torch.zeros(1, H)),
                             *map(torch.tensor, ws))
    assert h.shape == (H,) and c.shape == (H,) and h.dtype == np.float32
    np.testing.assert_allclose(h.data, th[0].numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(c.data, tc[0].numpy(), rtol=1e-5, atol=1e-6)
    g = F.gru_cell(x, None, *[w[:3 * H] for w in ws])
    assert g.shape == (H,)


# ----- fused sequence layers ------------------------------------------------------------

MODES = {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1}


def _fused_case(mode, layers, dirs, seed=0, bias=True):
    gates = MODES[mode]
    params = []
    for layer in range(layers):
        for d in range(dirs):
            params += _weights(gates, I if layer == 0 else dirs * H, seed + 10 * layer + 5 * d,
                               bias=bias)
    x = rand(T, N, I, seed=seed + 100)
    states = [rand(layers * dirs, N, H, seed=seed + 101 + k)
              for k in range(2 if mode == "lstm" else 1)]
    return x, states, params


def _lz_fused(mode, layers, bidir, batch_first=False, bias=True):
    def fn(x, *rest):
        n_states = 2 if mode == "lstm" else 1
        hx = tuple(rest[:n_states]) if mode == "lstm" else rest[0]
        y, h = getattr(F, mode)(x, hx, list(rest[n_states:]), bias, layers, 0.0, True, bidir,
                                batch_first)
        return [y, *h] if mode == "lstm" else [y, h]
    return fn


def _torch_fused(mode, layers, bidir, batch_first=False, bias=True):
    def fn(x, *rest):
        n_states = 2 if mode == "lstm" else 1
        hx = tuple(rest[:n_states]) if mode == "lstm" else rest[0]
        out = getattr(torch, mode)(x, hx, list(rest[n_states:]), bias, layers, 0.0, True,
                                   bidir, batch_first)
        return list(out)
    return fn


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("layers,bidir", [(1, False), (2, True)])
def test_fused_layers_match_torch(mode, layers, bidir):
    x, states, params = _fused_case(mode, layers, 2 if bidir else 1)
    arrays = [a.astype(np.float32) for a in [x, *states, *params]]
    check_torch(_lz_fused(mode, layers, bidir), _torch_fused(mode, layers, bidir), *arrays)


@pytest.mark.parametrize("mode", list(MODES))
def test_fused_layers_gradient_is_exact(mode):
    x, states, params = _fused_case(mode, 1, 2, seed=1)
    check_gradient(_lz_fused(mode, 1, True), x, *states, *params)


def test_fused_lstm_batch_first_no_bias_and_unbatched():
    x, states, params = _fused_case("lstm", 2, 1, seed=2, bias=False)
    xb = np.ascontiguousarray(x.transpose(1, 0, 2))
    arrays = [a.astype(np.float32) for a in [xb, *states, *params]]
    check_torch(_lz_fused("lstm", 2, False, True, False), _torch_fused("lstm", 2, False, True,
                                                                      False), *arrays)
    # unbatched: (T, I) input, (layers, H) states
    x1 = x[:, 0].astype(np.float32)
    h1 = [s[:, 0].astype(np.float32) for s in states]
    ps = [p.astype(np.float32) for p in params]
    y, (h, c) = F.lstm(x1, tuple(h1), ps, False, 2)
    ty, th, tc = torch.lstm(torch.tensor(x1)[:, None], tuple(torch.tensor(a)[:, None]
                                                             for a in h1),
                            list(map(torch.tensor, ps)), False, 2, 0.0, True, False, False)
    assert y.shape == (T, H) and h.shape == (2, H)
    np.testing.assert_allclose(y.data, ty[:, 0].numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(c.data, tc[:, 0].numpy(), rtol=1e-5, atol=1e-6)


def test_fused_lstm_zero_state_and_constant_weights():
    x, _, params = _fused_case("lstm", 1, 1, seed=3)
    xv = lz.Variable(x.astype(np.float32))
    y, (h, c) = F.lstm(xv, None, [p.astype(np.float32) for p in params])
    (y.sum() + c.sum()).backward()
    assert xv.grad is not None and xv.grad.dtype == np.float32


def test_fused_layers_refuse_double_backward_but_allow_create_graph():
    x, states, params = _fused_case("gru", 1, 1, seed=4)
    xv = lz.Variable(x)
    y, h = F.gru(xv, states[0], params)
    (gx,) = lz.grad([(y * y).sum()], [xv], create_graph=True)
    np.testing.assert_allclose(gx.data, lz.grad([(y * y).sum()], [xv])[0].data)
    with pytest.raises(NotImplementedError, match="gru.*not differentiable"):
        (gx * gx).sum().backward()


def test_dropout_between_layers_uses_the_process_generator():
    x, states, params = _fused_case("lstm", 2, 1, seed=5)
    runs = []
    for _ in range(2):
        lz.manual_seed(7)
        y, _ = F.lstm(x, tuple(states), params, True, 2, 0.5, True)
        runs.append(y.data)
    np.testing.assert_array_equal(*runs)
    y0, _ = F.lstm(x, tuple(states), params, True, 2, 0.5, False)   # not training: no dropout
    y1, _ = F.lstm(x, tuple(states), params, True, 2, 0.0, True)
    np.testing.assert_array_equal(y0.data, y1.data)
    assert not np.allclose(runs[0], y1.data)


# ----- packed sequences -----------------------------------------------------------------

LENGTHS = [4, 4, 2, 1]


def test_pack_and_pad_roundtrip_match_torch():
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
    x = rand(4, 4, 3, seed=6, dtype=np.float32)
    for batch_first, lengths, sort in [(False, LENGTHS, True), (True, [2, 4, 1, 3], False)]:
        p = F.pack_padded_sequence(x, lengths, batch_first, enforce_sorted=sort)
        tp = pack_padded_sequence(torch.tensor(x), torch.tensor(lengths), batch_first,
                                  enforce_sorted=sort)
        np.testing.assert_array_equal(p.data.data, tp.data.numpy())
        np.testing.assert_array_equal(p.batch_sizes, tp.batch_sizes.numpy())
        padded, lens = F.pad_packed_sequence(p, batch_first, padding_value=-1.0, total_length=5)
        tpadded, tlens = pad_packed_sequence(tp, batch_first, padding_value=-1.0,
                                             total_length=5)
        np.testing.assert_array_equal(padded.data, tpadded.numpy())
        np.testing.assert_array_equal(lens, tlens.numpy())
    check_all(lambda a: F.pad_packed_sequence(F.pack_padded_sequence(a, [3, 1]), False, 2.0)[0],
              lambda a: pad_packed_sequence(pack_padded_sequence(a, [3, 1]), False, 2.0)[0],
              rand(3, 2, 2, seed=7))


def test_pad_sequence_and_pack_sequence():
    from torch.nn.utils.rnn import pack_sequence, pad_sequence
    seqs = [rand(n, 2, seed=n) for n in (2, 3, 1)]
    check_all(lambda *s: F.pad_sequence(list(s), True, 0.5),
              lambda *s: pad_sequence(list(s), True, 0.5), *seqs)
    p = F.pack_sequence([s.astype(np.float32) for s in seqs], enforce_sorted=False)
    tp = pack_sequence([torch.tensor(s, dtype=torch.float32) for s in seqs], enforce_sorted=False)
    np.testing.assert_array_equal(p.data.data, tp.data.numpy())
    np.testing.assert_array_equal(p.sorted_indices, tp.sorted_indices.numpy())
    # gradients through the packed data: numbers, torch, and double backward with a
    # nonlinear upstream (packing only moves data, so the square is what makes it count)
    check_all(lambda *s: F.pack_sequence(list(s), enforce_sorted=False).data,
              lambda *s: pack_sequence(list(s), enforce_sorted=False).data, *seqs)
    check_double_backward(lambda *s: F.pack_sequence(list(s), enforce_sorted=False).data ** 2,
                          *seqs)
    ordered = sorted(seqs, key=len, reverse=True)
    check_all(lambda *s: F.pack_sequence(list(s)).data,
              lambda *s: pack_sequence(list(s)).data, *ordered)


@pytest.mark.parametrize("mode", ["lstm", "gru"])
@pytest.mark.parametrize("sort", [True, False])
def test_packed_fused_layers_match_torch_packed(mode, sort):
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
    lengths = LENGTHS if sort else [2, 4, 1, 4]
    x, states, params = _fused_case(mode, 1, 2, seed=8)
    x = rand(T, 4, I, seed=9)
    states = [rand(2, 4, H, seed=10 + k) for k in range(len(states))]

    def lz_fn(x, *rest):
        hx = tuple(rest[:len(states)]) if mode == "lstm" else rest[0]
        out, h = getattr(F, mode)(F.pack_padded_sequence(x, lengths, enforce_sorted=sort), hx,
                                  list(rest[len(states):]), True, 1, 0.0, True, True)
        y, _ = F.pad_packed_sequence(out)
        return [y, *h] if mode == "lstm" else [y, h]

    def t_fn(x, *rest):
        m = getattr(torch.nn, mode.upper())(I, H, bidirectional=True)
        m._flat_weights = list(rest[len(states):])    # the given tensors, with their grads
        hx = tuple(rest[:len(states)]) if mode == "lstm" else rest[0]
        out, h = m(pack_padded_sequence(x, torch.tensor(lengths), enforce_sorted=sort), hx)
        y, _ = pad_packed_sequence(out)
        return [y, *h] if mode == "lstm" else [y, h]

    arrays = [a.astype(np.float32) for a in [x, *states, *params]]
    check_torch(lz_fn, t_fn, *arrays)
    check_gradient(lz_fn, x, *states, *params)


def test_packed_lstm_never_reads_padding():
    x, states, params = _fused_case("lstm", 1, 1, seed=11)
    x = rand(T, 4, I, seed=12)
    xv = lz.Variable(x)
    out, (h, c) = F.lstm(F.pack_padded_sequence(xv, LENGTHS), None, params)
    # every packed row is a real time step: sum(lengths) rows, no padding
    assert out.data.shape == (sum(LENGTHS), H)
    (out.data.sum() + h.sum()).backward()
    pad = np.arange(T)[:, None] >= np.array(LENGTHS)[None, :]
    assert np.all(xv.grad.data[pad] == 0) and np.all(xv.grad.data[~pad] != 0)
    x2 = x.copy()
    x2[pad] = 1e6                                        # garbage in the padding
    out2, (h2, _) = F.lstm(F.pack_padded_sequence(x2, LENGTHS), None, params)
    np.testing.assert_array_equal(out.data.data, out2.data.data)
    np.testing.assert_array_equal(h.data, h2.data)


def test_bad_inputs_name_the_operator_and_argument():
    x, states, params = _fused_case("lstm", 1, 1)
    with pytest.raises(ValueError, match="lstm: expected 4 weights"):
        F.lstm(x, None, params[:3])
    with pytest.raises(ValueError, match=r"lstm: params\[0\].*w_ih.*shape"):
        F.lstm(x, None, [params[0][:, :2]] + params[1:])
    with pytest.raises(ValueError, match="lstm: h_0 must have shape"):
        F.lstm(x, (states[0][:, :1], states[1]), params)
    with pytest.raises(TypeError, match="lstm: hx must be a tuple"):
        F.lstm(x, states[0], params)
    with pytest.raises(ValueError, match="lstm: input must be"):
        F.lstm(x[0, 0], None, params)
    with pytest.raises(TypeError, match=r"lstm: params\[1\] has dtype float32"):
        F.lstm(x, None, [params[0], params[1].astype(np.float32)] + params[2:])
    with pytest.raises(ValueError, match="gru_cell: w_ih must have shape"):
        F.gru_cell(x[0], None, params[0], params[1][:3 * H])
    with pytest.raises(ValueError, match="lstm_cell: cx must have shape"):
        F.lstm_cell(x[0], None, np.zeros((3, H)), *params)
    with pytest.raises(TypeError, match="rnn_tanh_cell: x must be floating"):
        F.rnn_tanh_cell(np.zeros((2, I), np.int64), None, params[0][:H], params[1][:H])
    with pytest.raises(ValueError, match="pack_padded_sequence: lengths .* not sorted"):
        F.pack_padded_sequence(x, [1, 2])
    with pytest.raises(ValueError, match="pack_padded_sequence: a length of 9 exceeds"):
        F.pack_padded_sequence(x, [9, 2])
    with pytest.raises(ValueError, match="pack_padded_sequence: got 3 lengths"):
        F.pack_padded_sequence(x, [3, 2, 1])
    with pytest.raises(ValueError, match="pad_packed_sequence: total_length 1"):
        F.pad_packed_sequence(F.pack_padded_sequence(x, [3, 2]), total_length=1)
    with pytest.raises(TypeError, match="pad_packed_sequence: sequence must be a PackedSequence"):
        F.pad_packed_sequence(x)
    with pytest.raises(ValueError, match="pad_sequence: sequences must share"):
        F.pad_sequence([np.ones((2, 3)), np.ones((2, 4))])
    with pytest.raises(ValueError, match="pack_sequence: sequences must share"):
        F.pack_sequence([np.ones((2, 3)), np.ones(())])
    with pytest.raises(ValueError, match="pack_sequence: sequences must share"):
        F.pack_sequence([np.ones((2, 3)), np.ones((2, 4))])
    with pytest.raises(ValueError, match="pack_sequence: every sequence must be non-empty"):
        F.pack_sequence([np.ones((2, 3)), np.ones((0, 3))])
    with pytest.raises(TypeError, match="pack_sequence: enforce_sorted must be a bool"):
        F.pack_sequence([np.ones((2, 3))], enforce_sorted="no")
    packed = F.pack_padded_sequence(x, [3, 2])
    with pytest.raises(ValueError, match=r"pad_packed_sequence: sequence.data must be \(sum"):
        F.pad_packed_sequence(packed._replace(data=packed.data[:-1]))
    with pytest.raises(ValueError, match="pad_packed_sequence: sequence.batch_sizes must be"):
        F.pad_packed_sequence(packed._replace(batch_sizes=np.array([1, 2, 2])))
    with pytest.raises(ValueError, match="gru: expected 8 weights"):
        F.gru(x, None, params, True, 1, 0.0, True, True)
    with pytest.raises(ValueError, match="rnn_tanh: num_layers must be a positive int"):
        F.rnn_tanh(x, None, params, True, 0)
    with pytest.raises(ValueError, match="rnn_relu: dropout must be in"):
        F.rnn_relu(x, None, params, True, 1, 1.5)
