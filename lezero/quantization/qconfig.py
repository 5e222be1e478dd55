"""``QConfig``: how a layer is quantized -- a factory for the observer (or fake quantize)
of its output activation and one for its weight, as in ``torch.ao.quantization``.

=======================  ====================================================  =========
name                     activation                                            weight
=======================  ====================================================  =========
``default_qconfig``      MinMaxObserver, quint8 affine (0..255)                per-channel
``histogram_qconfig``    HistogramObserver (percentile 99.99), quint8 affine   symmetric
``default_qat_qconfig``  FakeQuantize(MovingAverageMinMax), quint8 affine      qint8
``lsq_qat_qconfig``      LearnableFakeQuantize (LSQ), quint8 affine            (-128..127)
=======================  ====================================================  =========

The full 0..255 activation range is used (PyTorch's fbgemm default halves it,
``reduce_range=True``, because its AVX2 kernel adds int16 pairs with saturation; the
kernels here widen to int16 first and cannot overflow).  Set ``module.qconfig = None``
to keep a layer in float.
"""
from collections import namedtuple

from lezero.quantization.fake_quant import FakeQuantize, LearnableFakeQuantize
from lezero.quantization.observers import (HistogramObserver, MinMaxObserver,
                                           MovingAverageMinMaxObserver,
                                           MovingAveragePerChannelMinMaxObserver,
                                           PerChannelMinMaxObserver)

__all__ = ["QConfig", "default_qconfig", "histogram_qconfig", "default_qat_qconfig",
           "lsq_qat_qconfig", "default_dynamic_qconfig", "get_default_qconfig",
           "default_weight_observer", "default_activation_observer"]

QConfig = namedtuple("QConfig", ["activation", "weight"])
QConfig.__doc__ = ("QConfig(activation, weight): factories (no-argument callables) for the "
                   "output observer and the weight observer of a layer.")

_WEIGHT = dict(dtype="qint8", qscheme="per_channel_symmetric", ch_axis=0, quant_min=-128,
               quant_max=127)
_ACT = dict(dtype="quint8", qscheme="per_tensor_affine", quant_min=0, quant_max=255)

default_activation_observer = MinMaxObserver.with_args(**_ACT)
default_weight_observer = PerChannelMinMaxObserver.with_args(**_WEIGHT)
default_qconfig = QConfig(default_activation_observer, default_weight_observer)
histogram_qconfig = QConfig(HistogramObserver.with_args(**_ACT), default_weight_observer)
default_qat_qconfig = QConfig(
    FakeQuantize.with_args(observer=MovingAverageMinMaxObserver, **_ACT),
    FakeQuantize.with_args(observer=MovingAveragePerChannelMinMaxObserver, **_WEIGHT))
lsq_qat_qconfig = QConfig(
    LearnableFakeQuantize.with_args(observer=MovingAverageMinMaxObserver, **_ACT),
    LearnableFakeQuantize.with_args(observer=PerChannelMinMaxObserver, **_WEIGHT))
default_dynamic_qconfig = QConfig(None, default_weight_observer)

_BY_NAME = {"ptq": default_qconfig, "histogram": histogram_qconfig,
            "qat": default_qat_qconfig, "lsq": lsq_qat_qconfig,
            "dynamic": default_dynamic_qconfig}


def get_default_qconfig(kind="ptq"):
    """The QConfig named ``kind``: "ptq", "histogram", "qat", "lsq" or "dynamic"."""
    if kind not in _BY_NAME:
        raise ValueError(f"get_default_qconfig: kind must be one of {sorted(_BY_NAME)}, "
                         f"got {kind!r}")
    return _BY_NAME[kind]
