"""``lezero.quantization``: INT8 models from float ones, by post-training calibration or
quantization-aware training, run with integer kernels.

    from lezero import quantization as Q
    model = Q.QuantWrapper(Q.fuse(float_model.eval()))   # or QuantStub/DeQuantStub inside
    prepared = Q.prepare(model)                          # observers
    Q.calibrate(prepared, batches)
    int8 = Q.convert(prepared)                           # uint8 x int8 -> int32 kernels

    qat = Q.prepare_qat(Q.fuse(model.train(), qat=True)) # fake quantization; train it
    int8 = Q.convert(qat.eval())

    dyn = Q.quantize_dynamic(float_model)                # Linear / LSTM: int8 weights

Composable wrappers on the core: nothing in ``lezero.core`` or ``lezero.functions``
knows about quantization.  See ``docs/quantization.md``.
"""
from lezero.quantization.dynamic import (DynamicQuantLinear, DynamicQuantLSTM,
                                         DynamicQuantizedLinear, quantize_dynamic)
from lezero.quantization.fake_quant import (FakeQuantize, FakeQuantizeAffine,
                                            FakeQuantizeBase, FakeQuantizeLearnable,
                                            LearnableFakeQuantize, disable_fake_quant,
                                            disable_observer, enable_fake_quant,
                                            enable_observer, fake_quantize)
from lezero.quantization.flows import (OBSERVED_TYPES, STATIC_MAPPING, calibrate, convert,
                                       prepare, prepare_qat)
from lezero.quantization.fuse import (ConvBn2d, ConvBnReLU2d, ConvReLU2d, LinearReLU,
                                      fold_bn, fuse)
from lezero.quantization.modules import (DeQuantize, QFunctional, Quantize,
                                         QuantAdaptiveAvgPool2d, QuantAvgPool2d,
                                         QuantConv2d, QuantConvReLU2d, QuantLinear,
                                         QuantLinearReLU, QuantMaxPool2d, QuantReLU,
                                         QuantReLU6)
from lezero.quantization.observers import (HistogramObserver, MinMaxObserver,
                                           MovingAverageMinMaxObserver,
                                           MovingAveragePerChannelMinMaxObserver,
                                           ObserverBase, PerChannelMinMaxObserver,
                                           PlaceholderObserver)
from lezero.quantization.qat import (QATConv2d, QATConvBn2d, QATConvBnReLU2d,
                                     QATConvReLU2d, QATLinear, QATLinearReLU,
                                     freeze_bn_stats, update_bn_stats)
from lezero.quantization.qconfig import (QConfig, default_dynamic_qconfig,
                                         default_qat_qconfig, default_qconfig,
                                         get_default_qconfig, histogram_qconfig,
                                         lsq_qat_qconfig)
from lezero.quantization.qtensor import (QTensor, QuantizationTypeError, is_quantized,
                                         qparams_of)
from lezero.quantization.sensitivity import (FloatFallback, SensitivityReport, keep_float,
                                             keep_most_sensitive, sensitivity_report)
from lezero.quantization.stubs import DeQuantStub, FloatFunctional, QuantStub, QuantWrapper
from lezero.quantization.utils import export_onnx, load_quantized, model_size

__all__ = [
    "prepare", "prepare_qat", "calibrate", "convert", "fuse", "fold_bn", "quantize_dynamic",
    "QuantStub", "DeQuantStub", "QuantWrapper", "FloatFunctional", "QFunctional",
    "QConfig", "default_qconfig", "histogram_qconfig", "default_qat_qconfig",
    "lsq_qat_qconfig", "default_dynamic_qconfig", "get_default_qconfig",
    "ObserverBase", "MinMaxObserver", "MovingAverageMinMaxObserver",
    "PerChannelMinMaxObserver", "MovingAveragePerChannelMinMaxObserver",
    "HistogramObserver", "PlaceholderObserver",
    "FakeQuantizeBase", "FakeQuantize", "LearnableFakeQuantize", "FakeQuantizeAffine",
    "FakeQuantizeLearnable", "fake_quantize", "enable_observer", "disable_observer",
    "enable_fake_quant", "disable_fake_quant", "freeze_bn_stats", "update_bn_stats",
    "ConvReLU2d", "LinearReLU", "ConvBn2d", "ConvBnReLU2d",
    "QATLinear", "QATLinearReLU", "QATConv2d", "QATConvReLU2d", "QATConvBn2d",
    "QATConvBnReLU2d",
    "Quantize", "DeQuantize", "QuantLinear", "QuantLinearReLU", "QuantConv2d",
    "QuantConvReLU2d", "QuantReLU", "QuantReLU6", "QuantMaxPool2d", "QuantAvgPool2d",
    "QuantAdaptiveAvgPool2d", "DynamicQuantLinear", "DynamicQuantLSTM",
    "DynamicQuantizedLinear", "QTensor", "QuantizationTypeError", "is_quantized",
    "qparams_of", "SensitivityReport", "sensitivity_report", "keep_float",
    "keep_most_sensitive", "FloatFallback", "export_onnx", "load_quantized", "model_size",
    "STATIC_MAPPING", "OBSERVED_TYPES",
]
