"""Observers give PyTorch's scale and zero point for the same data and scheme."""
import numpy as np
import pytest

import lezero as lz
from lezero.quantization import observers as O

torch = pytest.importorskip("torch")
TO = pytest.importorskip("torch.ao.quantization.observer")

RNG = np.random.default_rng(1)
BATCHES = [(RNG.standard_normal((4, 6, 5)) * (i + 1) + 0.4).astype(np.float32)
           for i in range(3)]


def _pairs():
    q8, q = torch.qint8, torch
    return [
        (O.MinMaxObserver(), TO.MinMaxObserver()),
        (O.MinMaxObserver(dtype="qint8", qscheme="per_tensor_symmetric"),
         TO.MinMaxObserver(dtype=q8, qscheme=q.per_tensor_symmetric)),
        (O.MinMaxObserver(qscheme="per_tensor_symmetric"),
         TO.MinMaxObserver(qscheme=q.per_tensor_symmetric)),
        (O.MinMaxObserver(quant_min=0, quant_max=127),
         TO.MinMaxObserver(quant_min=0, quant_max=127)),
        (O.MovingAverageMinMaxObserver(averaging_constant=0.1),
         TO.MovingAverageMinMaxObserver(averaging_constant=0.1)),
        (O.MovingAverageMinMaxObserver(dtype="qint8", qscheme="per_tensor_symmetric"),
         TO.MovingAverageMinMaxObserver(dtype=q8, qscheme=q.per_tensor_symmetric)),
        (O.PerChannelMinMaxObserver(), TO.PerChannelMinMaxObserver()),
        (O.PerChannelMinMaxObserver(ch_axis=1, dtype="qint8", qscheme="per_channel_symmetric"),
         TO.PerChannelMinMaxObserver(ch_axis=1, dtype=q8, qscheme=q.per_channel_symmetric)),
        (O.MovingAveragePerChannelMinMaxObserver(ch_axis=2, averaging_constant=0.3),
         TO.MovingAveragePerChannelMinMaxObserver(ch_axis=2, averaging_constant=0.3)),
    ]


@pytest.mark.parametrize("k", range(9))
def test_qparams_equal_torch(k):
    ours, theirs = _pairs()[k]
    for x in BATCHES:
        out = ours(lz.Variable(x))
        theirs(torch.tensor(x))
        assert out.data is x                     # an observer passes its input through
    s1, z1 = ours.calculate_qparams()
    s2, z2 = theirs.calculate_qparams()
    np.testing.assert_array_equal(s1, s2.numpy())
    np.testing.assert_array_equal(z1, z2.numpy().astype(np.int32))
    np.testing.assert_array_equal(ours.min_val, theirs.min_val.numpy())
    np.testing.assert_array_equal(ours.max_val, theirs.max_val.numpy())


def test_ranges_are_buffers_and_empty_observers_give_unit_scale():
    obs = O.MinMaxObserver()
    assert obs.calculate_qparams() == (np.ones(1, np.float32), np.zeros(1, np.int32))
    obs(BATCHES[0])
    assert set(obs.state_dict()) == {"min_val", "max_val"}
    other = O.MinMaxObserver()
    other.load_state_dict(obs.state_dict())
    np.testing.assert_array_equal(other.calculate_qparams()[0], obs.calculate_qparams()[0])


def test_histogram_observer_cuts_outliers():
    x = RNG.standard_normal(20000).astype(np.float32)
    x[:3] = [40.0, -35.0, 50.0]                  # a few outliers stretch min/max
    minmax = O.MinMaxObserver()
    minmax(x)
    for method in ("percentile", "entropy"):
        obs = O.HistogramObserver(method=method, percentile=99.9)
        obs(x[:10000])
        obs(x[10000:] * 1.5)                     # the range grows: old counts are re-binned
        assert obs.histogram.sum() == 20000
        scale, _ = obs.calculate_qparams()
        assert scale[0] < minmax.calculate_qparams()[0][0] / 4, method
    relu = np.maximum(x, 0)
    obs = O.HistogramObserver(method="entropy")
    obs(relu)
    scale, zp = obs.calculate_qparams()
    assert zp[0] == 0 and 2.0 / 255 < scale[0] < 40.0 / 255


def test_observer_argument_errors():
    with pytest.raises(ValueError, match="dtype"):
        O.MinMaxObserver(dtype="int4")
    with pytest.raises(ValueError, match="per_tensor"):
        O.MinMaxObserver(qscheme="per_channel_affine")
    with pytest.raises(ValueError, match="per_channel"):
        O.PerChannelMinMaxObserver(qscheme="per_tensor_affine")
    with pytest.raises(ValueError, match="quant_min"):
        O.MinMaxObserver(quant_min=0, quant_max=300)
    with pytest.raises(ValueError, match="qscheme"):
        O.MinMaxObserver(qscheme="affine")
    with pytest.raises(TypeError, match="float"):
        O.MinMaxObserver()(np.zeros(3, np.int32))
    obs = O.PerChannelMinMaxObserver()
    obs(np.zeros((3, 2), np.float32))
    with pytest.raises(ValueError, match="channels"):
        obs(np.zeros((4, 2), np.float32))
