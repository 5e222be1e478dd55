"""The quantized convolution and Linear on Intel MKL's integer GEMM (AMX or VNNI units).

``cblas_gemm_s8u8s32`` multiplies uint8 activations by int8 weights exactly into int32,
several times the rate of the Numba VNNI kernel on Intel CPUs with AMX.  ``nhwc`` sends
its products here when ``usable()`` (``lezero.runtime.mkl.used()``: the ``mkl`` wheel
loaded and ``policy.gemm`` "auto" on an Intel CPU, or "mkl"; on an AMD EPYC it took 2.5-8x
the time of ``int8_gemm``'s kernel); ``lz.runtime.policy.gemm = "numpy"`` brings back
``int8_gemm``'s kernel.  The blocks, the gather and the requantization are
``lezero.kernels.int8_blocks``; the weights are the (O, KH*KW*CP) int8 ``matrix`` that
``int8_gemm.pack`` keeps beside its VNNI panels.  Same integers as
``quantization.reference`` either way.
"""
import weakref

import numpy as np

from lezero.kernels import int8_blocks, int8_gemm
from lezero.runtime import Faster, mkl, policy

__all__ = ["usable", "choose", "conv2d", "linear", "INT8_SPEEDUP", "MIN_CHANNELS", "ADAPTIVE"]

# An int8 product runs about this many times faster than float32's: a part of an int8
# split takes as much work (in flops) as ``policy.gemm_min_part_flops`` times this.
INT8_SPEEDUP = 8
# Inputs with fewer channels stay on the VNNI kernel: on a stem (3 channels, K = 7*7*4)
# MKL runs at a third of its rate on deeper layers, the gather copies 28-byte runs and
# the requantization of 64 channels per pixel dominates; the VNNI kernel reads the
# windows in place and requantizes in registers, and was the faster one there.
MIN_CHANNELS = 16


# Per layer, MKL or the VNNI kernel by recent timings (``lezero.runtime.Faster``): on a
# quiet machine with two threads the VNNI kernel was as fast or faster (ResNet-18 INT8
# b2 160x160: 10.4 against 14.2 ms), on one thread or a busy machine MKL (b8 224x224, one
# thread: 59 against 80 ms).  False: MKL whenever ``usable``.
ADAPTIVE = True


def usable(packed):
    """True when MKL can compute the products of these packed weights."""
    return packed.matrix is not None and packed.cp >= MIN_CHANNELS and mkl.used()


def choose(packed):
    """``(way, chooser)``: "mkl" or "vnni" for this call of a layer with these weights,
    and the ``Faster`` that keeps the layer's timings (None when there is no choice)."""
    if not usable(packed):
        return "vnni", None
    if not ADAPTIVE:
        return "mkl", None
    chooser = _CHOOSERS.get(packed)
    if chooser is None:     # beside the weights, not on them: a trace compares their state
        chooser = _CHOOSERS[packed] = Faster(("mkl", "vnni"), name="int8 products",
                                             median=True)
    return chooser.pick(), chooser


_CHOOSERS = weakref.WeakKeyDictionary()     # packed weights -> their layer's Faster


def _min_part():
    return policy.gemm_min_part_flops * INT8_SPEEDUP / 2       # in multiply-adds


def conv2d(xp, geo, packed, bias_q, x_zp, m, shift, zp, lo, hi, dtype):
    """The convolution of the padded NHWC uint8 input ``xp`` (N, HP, WP, CP): ``geo``
    with its padding applied (0).  Returns (N*OH*OW, O) of ``dtype``."""
    op = "mkl_int8.conv2d"
    o = packed.out_features
    table = int8_gemm.checked_table(op, o, int8_gemm.bias_for(packed, bias_q, x_zp), m,
                                    shift, lo, hi, dtype)
    out = np.empty((xp.shape[0] * geo[8] * geo[9], o), dtype)
    return int8_blocks.blocks(mkl.library().cblas_gemm_s8u8s32, xp, geo, packed.matrix,
                              table, zp, lo, hi, out, _min_part())


def linear(a, packed, bias_q, x_zp, m, shift, zp, lo, hi, dtype):
    """``requant(a @ W.T)`` for uint8 rows ``a`` (M, CP) C-contiguous: (M, O)."""
    xp = a.reshape(a.shape[0], 1, 1, a.shape[1])
    return conv2d(xp, (1, 1, 1, 1, 0, 0, 1, 1, 1, 1), packed, bias_q, x_zp, m, shift, zp,
                  lo, hi, dtype)
