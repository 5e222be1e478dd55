"""Under autocast the fused LSTM keeps its gates and cell states in float16 and lifts
them to float32 one time step at a time in backward (``LSTMLayer.amp_reads_low``), not
all at once: the same gradients, a lower backward peak."""
import tracemalloc

import numpy as np
import pytest

import lezero as lz
from lezero import amp, nn
from lezero.functions.rnn.layers import LSTMLayer


def _grads_and_peak(all_at_once, monkeypatch):
    if all_at_once:
        monkeypatch.setattr(LSTMLayer, "amp_reads_low", ())
    lz.manual_seed(0)
    lstm = nn.LSTM(32, 64, num_layers=1)
    x = lz.Variable(np.random.default_rng(0).standard_normal((40, 8, 32)).astype(np.float32))
    with amp.autocast("float16"):
        y, _ = lstm(x)
        loss = (y ** 2).sum()
    tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    loss.backward()
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    return [p.grad.data.copy() for p in lstm.parameters()] + [x.grad.data.copy()], peak


def test_step_by_step_lifting_gives_the_same_gradients_for_less_memory(monkeypatch):
    _grads_and_peak(False, monkeypatch)     # first: kernels compile or load, caches fill
    low, low_peak = _grads_and_peak(False, monkeypatch)
    with monkeypatch.context() as m:
        lifted, lifted_peak = _grads_and_peak(True, m)
    for a, b in zip(low, lifted):
        np.testing.assert_array_equal(a, b)
    # 40 steps x 8 rows of 6 x 64 float32 saved values no longer lifted at once (~480 KiB)
    assert low_peak < lifted_peak - 300 * 1024, (low_peak, lifted_peak)


def test_the_float32_backward_is_untouched():
    lz.manual_seed(0)
    lstm = nn.LSTM(4, 5)
    x = lz.Variable(np.random.default_rng(1).standard_normal((3, 2, 4)).astype(np.float32))
    y, _ = lstm(x)
    (y ** 2).sum().backward()
    assert x.grad.dtype == np.float32 and np.all(np.isfinite(x.grad.data))
    assert LSTMLayer.amp_reads_low == ("gates", "tanh_c", "c_prev")


if __name__ == "__main__":
    pytest.main([__file__])
