"""The LSTM layer's time loop split over threads (``kernels.lstm_parts``) against the
serial loop (the pieces it stands on, NumPy's ``cblas_sgemm`` and the meeting of the
chunks, are tested in tests/runtime)."""
import numpy as np
import pytest
import torch

import lezero as lz
import lezero.functions as F
from lezero import kernels, nn
from lezero.functions.rnn import layers
from lezero.kernels import lstm_parts
from lezero.runtime import policy

pytestmark = pytest.mark.skipif(not kernels.numba_available(), reason="needs Numba")


def test_chunks_cover_the_hidden_units_on_multiples_of_8():
    assert lstm_parts.chunks(256, 2).tolist() == [0, 128, 256]
    assert lstm_parts.chunks(40, 2).tolist() == [0, 16, 40]
    b = lstm_parts.chunks(100, 3).tolist()
    assert b[0] == 0 and b[-1] == 100 and all(x % 8 == 0 for x in b[1:-1])
    assert all(lo < hi for lo, hi in zip(b[:-1], b[1:]))


def _train_step(lstm, x, threads):
    """Forward, a loss that uses every output, backward: (outputs, grads)."""
    with lz.using_config("conv_threads", threads):
        for p in lstm.parameters():
            p.cleargrad()
        xs = [lz.Variable(a) for a in x] if isinstance(x, list) else lz.Variable(x)
        inp = F.pack_sequence(xs) if isinstance(x, list) else xs
        out, (h, c) = lstm(inp)
        y = out.data if isinstance(x, list) else out
        loss = F.sum(y * y) + F.sum(h * h * 2.0) + F.sum(c * c * 3.0)
        loss.backward()
    xg = [v.grad.data for v in xs] if isinstance(x, list) else [xs.grad.data]
    return [y.data, h.data, c.data], xg + [p.grad.data for p in lstm.parameters()]


@pytest.fixture
def spy(monkeypatch, threaded):
    """Count the split forward and backward calls; let small layers split too."""
    calls = {"forward": 0, "backward": 0}
    for name in calls:
        real = getattr(lstm_parts, name)

        def counted(*a, _real=real, _name=name):
            calls[_name] += 1
            return _real(*a)
        monkeypatch.setattr(lstm_parts, name, counted)
    with policy.using(lstm_min_part_flops=1):
        yield calls


@pytest.mark.parametrize("hidden,bidir", [(64, False), (40, True), (48, False)])
def test_split_layer_equals_the_serial_loop(spy, hidden, bidir):
    lz.manual_seed(0)
    lstm = nn.LSTM(12, hidden, num_layers=2, bidirectional=bidir)
    x = np.random.default_rng(1).standard_normal((6, 5, 12)).astype(np.float32)
    ref_out, ref_grads = _train_step(lstm, x, 1)
    assert spy == {"forward": 0, "backward": 0}
    out, grads = _train_step(lstm, x, 2)
    layers_run = 2 * (2 if bidir else 1)
    assert spy == {"forward": layers_run, "backward": layers_run}
    for got, want in zip(out + grads, ref_out + ref_grads):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_split_layer_on_packed_sequences_of_different_lengths(spy):
    lz.manual_seed(1)
    lstm = nn.LSTM(7, 32, bidirectional=True)
    rng = np.random.default_rng(2)
    seqs = [rng.standard_normal((n, 7)).astype(np.float32) for n in (9, 6, 6, 2)]
    ref_out, ref_grads = _train_step(lstm, seqs, 1)
    out, grads = _train_step(lstm, seqs, 2)
    assert spy["forward"] == 2 and spy["backward"] == 2
    for got, want in zip(out + grads, ref_out + ref_grads):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_split_layer_matches_torch(spy):
    lz.manual_seed(3)
    lstm = nn.LSTM(16, 64)
    t_lstm = torch.nn.LSTM(16, 64)
    t_lstm.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in
                            lstm.state_dict().items()})
    x = np.random.default_rng(4).standard_normal((5, 3, 16)).astype(np.float32)
    out, grads = _train_step(lstm, x, 2)
    assert spy["forward"] == 1
    tx = torch.tensor(x, requires_grad=True)
    ty, (th, tc) = t_lstm(tx)
    ((ty * ty).sum() + (th * th * 2).sum() + (tc * tc * 3).sum()).backward()
    want = [ty, th, tc, tx.grad] + [p.grad for p in t_lstm.parameters()]
    for got, w in zip(out + grads, want):
        np.testing.assert_allclose(got, w.detach().numpy(), rtol=1e-4, atol=1e-5)


def test_serial_loop_where_a_split_cannot_run(spy):
    lz.manual_seed(0)
    x = np.random.default_rng(1).standard_normal((4, 3, 8)).astype(np.float32)
    lstm64 = nn.LSTM(8, 64)
    for p in lstm64.parameters():
        p.data = p.data.astype(np.float64)
    _train_step(lstm64, x.astype(np.float64), 2)                   # float64: serial
    lstm = nn.LSTM(8, 64)
    with lz.using_config("use_numba", False):
        _train_step(lstm, x, 2)                                     # Numba off
    _train_step(nn.LSTM(8, 8), x, 2)                                # 8 units: no chunks of 16
    assert spy == {"forward": 0, "backward": 0}
    assert layers.lstm_parts is lstm_parts
