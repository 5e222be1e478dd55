"""The kernels' other callers refuse what would reach a kernel out of bounds: the integer
kernels of quantized models, the float16 conversion of autocast, the convolution and
pooling Functions called with arrays (or a geometry) that are not the ones they were
built for -- a replayed graph, one rebuilt from a file -- and a checkpointed block
whose recomputation returns other outputs.  Last, the operators that index with user
data name the operator and the bad index before any kernel runs.
"""
import numpy as np
import pytest

import lezero as lz
import lezero.functions as F
from lezero.amp import convert
from lezero.functions.conv.functions import Conv, ConvGradInput, ConvGradWeight, Fold, Unfold
from lezero.functions.conv.geometry import ConvGeometry, conv_geometry
from lezero.functions.pooling.common import Geom, IndexScatter
from lezero.functions.pooling.max import MaxPoolNd, MaxUnpool2d
from lezero.kernels import numba_available

pytestmark = pytest.mark.skipif(not numba_available(), reason="Numba is not installed")

RNG = np.random.default_rng(0)


def f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def i16(*shape):
    return RNG.integers(-100, 100, shape).astype(np.int16)


def i8(*shape):
    return RNG.integers(-100, 100, shape).astype(np.int8)


def tables(n, shift=-1):
    """Per-channel requantization tables (bias, m, shift) of length ``n``."""
    return (np.zeros(n, np.int32), np.full(n, 1 << 30, np.int32), np.full(n, shift, np.int32))


def qk():
    from lezero.quantization import kernels
    return kernels


QGEO = (3, 3, 1, 1, 1, 1, 1, 1, 6, 6)          # 3x3, padding 1, on 6x6
QUANTIZED = {
    "gemm_acc other K": (lambda: qk().gemm_acc(i16(4, 64), i16(3, 8)), ValueError,
                         r"gemm_acc: a \(M, K\) and b \(N, K\) must share K, got \(4, 64\) "
                         r"and \(3, 8\)"),
    "gemm_acc int8": (lambda: qk().gemm_acc(i8(4, 8), i16(3, 8)), TypeError,
                      r"gemm_acc: a must be int16, got dtype int8"),
    "gemm_requant short tables": (
        lambda: qk().gemm_requant(i16(4, 8), i16(300, 8), *tables(3), 0, -128, 127, np.int8),
        ValueError, r"gemm_requant: bias must have shape \(300,\), got \(3,\)"),
    "gemm_requant shift out of range": (
        lambda: qk().gemm_requant(i16(4, 8), i16(3, 8), *tables(3, shift=40), 0, -128, 127,
                                  np.int8),
        ValueError, r"gemm_requant: multipliers must lie in \[0, 2\*\*31\) and shifts in "
                    r"\[-31, 30\]"),
    "conv_requant patches longer than the weight rows": (
        lambda: qk().conv_requant(i16(2, 36, 27), i16(4, 9), *tables(4), 0, -128, 127,
                                  np.int8),
        ValueError, r"conv_requant: w must be \(out_channels, 27\) for these patches, got "
                    r"shape \(4, 9\)"),
    "conv2d weight for other channels": (
        lambda: qk().conv2d(i8(1, 3, 6, 6), 0, QGEO, i16(4, 9), *tables(4), 0, -128, 127,
                            np.int8),
        ValueError, r"conv2d: w must be \(out_channels, 27\)"),
    "conv2d output too large": (
        lambda: qk().conv2d(i8(1, 1, 6, 6), 0, QGEO[:8] + (20, 20), i16(4, 9), *tables(4),
                            0, -128, 127, np.int8),
        ValueError, r"conv2d: output size \(20, 20\) does not fit input size \(6, 6\)"),
    "max_pool window in padding only": (
        lambda: qk().max_pool(i8(1, 2, 6, 6), (2, 2, 1, 1, 3, 0, 1, 1, 9, 5)),
        ValueError, r"max_pool: .*a window of axis 0 has no tap inside the input"),
    "avg_pool divisor 0": (
        lambda: qk().avg_pool(i8(1, 2, 6, 6), (2, 2, 2, 2, 0, 0, 1, 1, 3, 3), 0, True, 0),
        ValueError, r"avg_pool: divisor_override must hold ints in \[1, "),
    "adaptive_avg_pool empty output": (
        lambda: qk().adaptive_avg_pool(i8(1, 2, 6, 6), (0, 3)), ValueError,
        r"adaptive_avg_pool: output size must hold ints in \[1, "),
    "add shorter b": (
        lambda: qk().add(i8(1000), i8(10), (0, 1 << 30, -1) * 2 + (1 << 30, -1, 0, 20),
                         -128, 127, np.int8),
        ValueError, r"add: a and b must have the same shape, got \(1000,\) and \(10,\)"),
    "add parameters": (
        lambda: qk().add(i8(4), i8(4), (0, 1 << 30, -1), -128, 127, np.int8), ValueError,
        r"add: parameters must hold 10 ints, got 3"),
    "add left shift": (
        lambda: qk().add(i8(4), i8(4), (0, 1 << 30, -1) * 2 + (1 << 30, -1, 0, 70),
                         -128, 127, np.int8),
        ValueError, r"add: the left shift must lie in \[0, 31\], got 70"),
    "mul shorter b": (
        lambda: qk().mul(i8(1000), i8(10), (0, 0, 1 << 30, -1, 0), -128, 127, np.int8),
        ValueError, r"mul: a and b must have the same shape"),
    "rescale shift": (
        lambda: qk().rescale(i8(4), 0, 1 << 30, 99, 0, -128, 127, np.int8), ValueError,
        r"rescale: multipliers must lie in \[0, 2\*\*31\) and shifts in \[-31, 30\]"),
    "rescale float output": (
        lambda: qk().rescale(i8(4), 0, 1 << 30, -1, 0, -128, 127, np.float32), ValueError,
        r"rescale: the output must be integers"),
}


@pytest.mark.parametrize("case", list(QUANTIZED))
def test_quantized_kernel_wrappers_refuse(case):
    call, error, message = QUANTIZED[case]
    with pytest.raises(error, match=message):
        call()


@pytest.mark.parametrize("fn, dtype, wrong", [
    (convert.float32_to_float16, "float32", np.float16),
    (convert.float16_to_float32, "float16", np.float32)])
def test_float16_conversions_refuse_another_dtype(fn, dtype, wrong):
    """float32_to_float16 read a float16 array's bytes as float32 words: twice as many
    elements as there were words."""
    with pytest.raises(TypeError, match=f"must be a {dtype} array, got {np.dtype(wrong)}"):
        fn(np.ones(5000, wrong))


# ----- the Functions against the arrays and geometry they are given -------------------------

GEOM = conv_geometry("test", (1, 2, 8, 8), (4, 2, 3, 3), 2, 1, 0, 1, 1)       # valid 3x3


def _crafted(**changes):
    """GEOM with fields replaced (what a file could hold)."""
    fields = dict(GEOM.__dict__)
    fields.update(changes)
    return ConvGeometry(**fields)


FUNCTIONS = {
    "conv input of another size": (
        lambda: Conv(GEOM)(f32(1, 2, 6, 6), f32(4, 2, 3, 3)), ValueError,
        r"conv: x of shape \(1, 2, 6, 6\) does not fit the geometry k3x3 s1x1 p0,0/0,0 d1x1 "
        r"g1: expected \(N, C, 8, 8\)"),
    "conv output beyond the input (direct)": (
        lambda: Conv(_crafted(out_size=(12, 12)), "direct")(f32(1, 2, 8, 8), f32(4, 2, 3, 3)),
        ValueError, r"conv: output size \(12, 12\) does not fit input size \(8, 8\)"),
    "conv weight of another kernel": (
        lambda: Conv(GEOM, "im2col")(f32(1, 2, 8, 8), f32(4, 2, 5, 5)), ValueError,
        r"conv: w of shape \(4, 2, 5, 5\) does not fit the geometry"),
    "conv groups not dividing": (
        lambda: Conv(_crafted(groups=3), "im2col")(f32(1, 2, 8, 8), f32(4, 2, 3, 3)),
        ValueError, r"conv: channels do not agree"),
    "conv stride 0": (
        lambda: Conv(_crafted(stride=(0, 1)))(f32(1, 2, 8, 8), f32(4, 2, 3, 3)), ValueError,
        r"conv: stride must hold ints in \[1, "),
    "conv kernel given as floats": (
        lambda: Conv(_crafted(kernel=(3.0, 3)))(f32(1, 2, 8, 8), f32(4, 2, 3, 3)), TypeError,
        r"conv: kernel size must hold ints, got float 3.0"),
    "conv_transpose gradient of another size": (
        lambda: ConvGradInput(GEOM)(f32(1, 4, 5, 5), f32(4, 2, 3, 3)), ValueError,
        r"conv_transpose: y of shape \(1, 4, 5, 5\) does not fit the geometry"),
    "conv_grad_weight batches": (
        lambda: ConvGradWeight(GEOM)(f32(2, 2, 8, 8), f32(1, 4, 6, 6)), ValueError,
        r"conv_grad_weight: x \(2, 2, 8, 8\) and y \(1, 4, 6, 6\) have different batch"),
    "unfold input of another size": (
        lambda: Unfold(GEOM)(f32(1, 2, 9, 9)), ValueError,
        r"unfold: x of shape \(1, 2, 9, 9\) does not fit the geometry"),
    "fold columns of another length": (
        lambda: Fold(GEOM, (1, 2, 8, 8))(f32(1, 18, 30)), ValueError,
        r"fold: columns of shape \(1, 18, 30\) do not fit an output of shape \(1, 2, 8, 8\): "
        r"expected \(1, 18, 36\)"),
    "max pooling input of another size": (
        lambda: MaxPoolNd(Geom((2, 2), (2, 2), (0, 0), (1, 1), (8, 8), (4, 4)))(f32(1, 2, 6, 6)),
        ValueError, r"max_pool: input of shape \(1, 2, 6, 6\) does not fit the pooling "
                    r"geometry, made for spatial size \(8, 8\)"),
    "max unpooling negative index": (
        lambda: MaxUnpool2d(np.array([[[[0, -1]]], [[[0, 1]]]]), (2, 1, 2, 2))(f32(2, 1, 1, 2)),
        ValueError, r"max_unpool2d: indices must lie in \[0, 4\) for output planes of 4 "
                    r"elements, got values in \[-1, 1\]"),
    "max unpooling indices of other planes": (
        lambda: MaxUnpool2d(np.zeros((1, 1, 1, 2), np.int64), (2, 1, 2, 2))(f32(2, 1, 1, 2)),
        ValueError, r"max_unpool2d: indices of shape \(1, 1, 1, 2\) and output planes "
                    r"\(2, 1\) must match the input"),
    "max pooling gradient of another size": (
        lambda: IndexScatter(np.zeros((1, 2, 3, 3), np.int64), (1, 2, 6, 6))(f32(1, 2, 4, 4)),
        ValueError, r"max pooling's gradient: gradient of shape \(1, 2, 4, 4\) and indices "
                    r"of shape \(1, 2, 3, 3\) must share the \(N, C\) planes"),
    "max pooling gradient with an index outside its plane": (
        lambda: IndexScatter(np.full((1, 2, 3, 3), 36), (1, 2, 6, 6))(f32(1, 2, 3, 3)),
        IndexError, r"scatter_add_rows: index 36 is out of range for 36 rows"),
}


@pytest.mark.parametrize("case", list(FUNCTIONS))
def test_functions_refuse_arrays_that_do_not_fit(case):
    call, error, message = FUNCTIONS[case]
    with pytest.raises(error, match=message):
        call()


def test_functions_still_run_what_fits():
    x, w = f32(1, 2, 8, 8), f32(4, 2, 3, 3)
    for algo in ("im2col", "direct", "winograd", "fft"):
        assert Conv(GEOM, algo)(x, w).shape == (1, 4, 6, 6)
    assert Fold(GEOM, (1, 2, 8, 8))(Unfold(GEOM)(x)).shape == (1, 2, 8, 8)


def test_checkpoint_recomputation_with_other_outputs_is_refused():
    """A block that returns other outputs when recomputed: the gradients arriving were
    made for the forward's outputs (it raised a bare IndexError)."""
    calls = []

    def block(x):
        calls.append(1)
        return (x * 2, x * 3) if len(calls) == 1 else x * 2
    x = lz.Variable(np.ones(3, np.float32), requires_grad=True)
    y = lz.checkpoint(block, x)
    with pytest.raises(RuntimeError, match=r"checkpoint: the recomputation returned "
                                           r"\[\(\(3,\), dtype\('float32'\)\), None\] where "
                                           r"the forward returned"):
        (y[0] + y[1]).sum().backward()


# ----- operators that index with user data ----------------------------------------------------

W = np.arange(15, dtype=np.float32).reshape(5, 3)
X = np.arange(12, dtype=np.float32).reshape(3, 4)
INDEXING = {
    "embedding >= num": (lambda: F.embedding(np.array([5]), W), ValueError,
                         r"embedding: index 5 is out of range for a weight with 5 rows"),
    "embedding < -num": (lambda: F.embedding(np.array([-6]), W), ValueError,
                         r"embedding: index -6 is out of range"),
    "embedding_bag index": (lambda: F.embedding_bag(np.array([1, 2, 7]), W,
                                                    offsets=np.array([0, 1])),
                            ValueError, r"embedding_bag: index 7 in input is out of range"),
    "embedding_bag offsets": (lambda: F.embedding_bag(np.array([1, 2, 3]), W,
                                                      offsets=np.array([0, 5])),
                              ValueError, r"embedding_bag: offsets\[-1\] is 5, beyond the "
                                          r"input's length 3"),
    "gather": (lambda: F.gather(X, 1, np.full((3, 4), 4)), IndexError,
               r"gather: index holds 4, which is out of range for an axis of length 4"),
    "scatter_add": (lambda: F.scatter_add(X, 1, np.full((3, 4), -1), X), IndexError,
                    r"scatter_add: index holds -1"),
    "index_select": (lambda: F.index_select(X, 1, np.array([4])), IndexError,
                     r"index_select: index holds 4"),
    "take": (lambda: F.take(X, np.array([12])), IndexError, r"take: indices holds 12"),
    "max_unpool2d": (lambda: F.max_unpool2d(f32(1, 1, 2, 2), np.array([[[[0, 1], [2, 16]]]]),
                                            2),
                     ValueError, r"max_unpool2d: indices must lie in \[0, 16\)"),
    "one_hot": (lambda: F.one_hot(np.array([3]), 3), IndexError,
                r"one_hot: indices \(a class\) holds 3"),
    "cross_entropy": (lambda: F.cross_entropy(X, np.array([4, 0, 1])), ValueError,
                      r"cross_entropy: target index 4 is out of range for 4 classes"),
    "nll_loss": (lambda: F.nll_loss(X, np.array([-2, 0, 1])), ValueError,
                 r"nll_loss: target index -2 is out of range for 4 classes"),
}


@pytest.mark.parametrize("case", list(INDEXING))
def test_indexing_operators_refuse_out_of_range_indices(case):
    call, error, message = INDEXING[case]
    with pytest.raises(error, match=message):
        call()
