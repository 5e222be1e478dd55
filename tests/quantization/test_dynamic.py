"""Dynamic quantization of Linear and LSTM: int8 weights, activations quantized per call."""
import numpy as np
import pytest

import lezero as lz
from lezero import nn
from lezero import quantization as Q

RNG = np.random.default_rng(7)


def _run(m, *args):
    with lz.no_grad():
        return m(*args)


def test_dynamic_linear_is_the_integer_product_of_its_quantized_operands():
    lin = nn.Linear(24, 10)
    x = RNG.standard_normal((5, 3, 24)).astype(np.float32)
    dyn = Q.quantize_dynamic(nn.Sequential(lin, nn.ReLU()))
    assert isinstance(dyn[0], Q.DynamicQuantLinear) and dyn[0].weight.dtype == np.int8
    got = _run(dyn[0], x).data
    # by hand: x quantized from its range, weights per channel, exact integer sums
    lo, hi = min(x.min(), 0), max(x.max(), 0)
    sx = np.float32((hi - lo) / np.float32(255))
    zx = int(0 - np.rint(np.float32(lo) / sx))
    qx = np.clip(np.rint(x * (np.float32(1) / sx)) + zx, 0, 255)
    w = dyn[0]
    acc = (qx - zx).astype(np.int64) @ w.weight.astype(np.int64).T
    want = acc.astype(np.float32) * (sx * w.weight_scale) + w.bias
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    ref = _run(lin, x).data
    assert np.abs(got - ref).max() < 0.02 * np.abs(ref).max()
    assert type(lin) is nn.Linear                    # the original is untouched


@pytest.mark.parametrize("batch_first, bidirectional, layers", [(False, False, 1),
                                                               (True, True, 2)])
def test_dynamic_lstm_follows_the_float_lstm(batch_first, bidirectional, layers):
    lz.manual_seed(3)
    lstm = nn.LSTM(6, 8, num_layers=layers, batch_first=batch_first,
                   bidirectional=bidirectional)
    x = RNG.standard_normal((4, 5, 6) if batch_first else (5, 4, 6)).astype(np.float32)
    dyn = Q.quantize_dynamic(lstm)
    assert isinstance(dyn, Q.DynamicQuantLSTM)
    y, (h, c) = _run(dyn, x)
    y0, (h0, c0) = _run(lstm, x)
    assert y.shape == y0.shape and h.shape == h0.shape and c.shape == c0.shape
    for a, b in ((y, y0), (h, h0), (c, c0)):
        assert np.abs(a.data - b.data).max() < 0.03
    hx = (RNG.standard_normal(h0.shape).astype(np.float32),) * 2
    y1, _ = _run(dyn, x, hx)
    y2, _ = _run(lstm, x, hx)
    assert np.abs(y1.data - y2.data).max() < 0.03


def test_dynamic_errors_and_state():
    with pytest.raises(ValueError, match="only nn.Linear and nn.LSTM"):
        Q.quantize_dynamic(nn.Linear(2, 2), {nn.Conv2d})
    with pytest.raises(ValueError, match="input features"):
        _run(Q.quantize_dynamic(nn.Linear(3, 2)), np.zeros((1, 4), np.float32))
    dyn = Q.quantize_dynamic(nn.Linear(3, 2))
    other = Q.DynamicQuantLinear(3, 2)
    other.load_state_dict(dyn.state_dict())
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    np.testing.assert_array_equal(_run(other, x).data, _run(dyn, x).data)
