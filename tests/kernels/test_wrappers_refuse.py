"""Every Numba kernel's wrapper refuses what its kernel would index out of bounds.

The kernels read and write without bounds checks, so each wrapper (``<op>_numba``, the
dispatcher or driver that builds the kernel's arguments) checks the shapes, lengths,
index ranges, dtypes and geometry the kernel relies on, and raises a clear error first
(``lezero.kernels.argcheck``).  Each case below feeds one wrapper one wrong argument
and checks the error and its message; before these checks, each one read or wrote
memory the kernel did not own (or returned a wrong value without an error).  The
operators that index with user data are checked at the end: they refuse out-of-range
indices before any kernel runs.
"""
import numpy as np
import pytest

import lezero as lz
import lezero.functions as F
from lezero import runtime
from lezero.kernels import (add, attention, bias, conv_direct, gelu, im2col, join,
                            numba_available, pooling, relu, scatter, softmax, winograd)

pytestmark = pytest.mark.skipif(not numba_available(), reason="Numba is not installed")

RNG = np.random.default_rng(0)


def f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def zeros(*shape, dtype=np.float32):
    return np.zeros(shape, dtype)


def strided(*shape):
    """A float32 array of ``shape`` that is not C-contiguous (every other column)."""
    return f32(*shape[:-1], 2 * shape[-1])[..., ::2]


# (wrapper call, error type, message pattern): one wrong argument each
LENET = (5, 5, 1, 1, 0, 0, 1, 1)
PADDED = (3, 3, 1, 1, 1, 1, 1, 1)
GEO15 = (1, 3, 3, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 4, 4)
CASES = {
    # elementwise: the kernels read gy[i] for every element of x
    "relu_grad_numba shorter gy": (lambda: relu.relu_grad_numba(f32(1000), f32(10)),
                                   ValueError, r"relu_grad_numba: x and gy must have the "
                                               r"same shape, got \(1000,\) and \(10,\)"),
    "relu_grad dispatcher": (lambda: relu.relu_grad(f32(4, 5), f32(5)), ValueError,
                             r"relu_grad: x and gy must have the same shape"),
    "add_numba shorter x1": (lambda: add.add_numba(f32(1000), f32(10)), ValueError,
                             r"add_numba: x0 and x1 must have the same shape, got "
                             r"\(1000,\) and \(10,\)"),
    "add_numba mixed dtypes": (lambda: add.add_numba(f32(8), np.ones(8)), TypeError,
                               r"add_numba: x0 and x1 must have one dtype, got float32 and "
                               r"float64"),
    "add_numba ints": (lambda: add.add_numba(np.arange(5), np.arange(5)), TypeError,
                       r"add_numba: x0 must hold floats, got dtype int64"),
    "relu_numba ints": (lambda: relu.relu_numba(np.arange(5)), TypeError,
                        r"relu_numba: x must hold floats, got dtype int64"),
    "relu_numba list": (lambda: relu.relu_numba([1.0, 2.0]), TypeError,
                        r"relu_numba: x must be a NumPy array, got list"),
    "gelu_grad_numba shorter gy": (lambda: gelu.gelu_grad_numba(f32(1000), f32(10)),
                                   ValueError, r"gelu_grad_numba: x and gy must have the "
                                               r"same shape"),
    "gelu_grad dispatcher": (lambda: gelu.gelu_grad(f32(6), f32(3)), ValueError,
                             r"gelu_grad: x and gy must have the same shape"),
    "gelu_numba float64": (lambda: gelu.gelu_numba(np.ones(4)), TypeError,
                           r"gelu_numba: x must be float32, got dtype float64"),
    "gelu_numba approximate": (lambda: gelu.gelu_numba(f32(4), "tan"), ValueError,
                               r"gelu_numba: approximate must be 'none' or 'tanh', "
                               r"got 'tan'"),
    "run_elementwise lengths": (lambda: runtime.run_elementwise(relu._grad, f32(1000), f32(10),
                                                                zeros(1000)),
                                ValueError, r"run_elementwise: the arrays of an elementwise "
                                            r"kernel must be 1-D of one length, got shapes "
                                            r"\[\(1000,\), \(10,\), \(1000,\)\]"),
    "SplitWhenFaster.run lengths": (lambda: runtime.SplitWhenFaster(1 << 17).run(
        relu._forward, f32(1000), zeros(10)), ValueError,
        r"SplitWhenFaster.run: the arrays of an elementwise kernel must be 1-D of one length"),
    # softmax: rows of y and gy are read together
    "softmax_grad_numba fewer rows": (lambda: softmax.softmax_grad_numba(f32(64, 8),
                                                                         f32(2, 8)),
                                      ValueError, r"softmax_grad_numba: y and gy must have "
                                                  r"the same shape"),
    "softmax_grad_numba other width": (lambda: softmax.softmax_grad_numba(f32(4, 64),
                                                                          f32(4, 8)),
                                       ValueError, r"y and gy must have the same shape"),
    "softmax_grad dispatcher": (lambda: softmax.softmax_grad(f32(4, 8), f32(1, 8)),
                                ValueError, r"softmax_grad: y and gy"),
    "masked_softmax_numba 1-D": (lambda: softmax.masked_softmax_numba(f32(5)), ValueError,
                                 r"masked_softmax_numba: s must be \(\.\.\., L, S\)"),
    "masked_softmax_numba float64": (lambda: softmax.masked_softmax_numba(np.ones((2, 3))),
                                     TypeError, r"s must be float32, got dtype float64"),
    "softmax_stats_numba 3-D": (lambda: softmax.softmax_stats_numba(f32(2, 3, 4)),
                                ValueError, r"softmax_stats_numba: x must be 2-D, got "
                                            r"shape \(2, 3, 4\)"),
    # bias: b[j] for every column
    "add_bias_numba short b": (lambda: bias.add_bias_numba(f32(4, 1000), f32(3)),
                               ValueError, r"add_bias_numba: y must be 2-D and b of shape "
                                           r"\(columns,\); got y \(4, 1000\) and b \(3,\)"),
    "bias_grad_numba 1-D": (lambda: bias.bias_grad_numba(f32(5)), ValueError,
                            r"bias_grad_numba: g must be 2-D"),
    # scatter: index planes, values rows, a target the sums really land in
    "scatter_planes_ fewer index planes": (
        lambda: scatter.scatter_planes_(zeros(4, 5), np.zeros((1, 3), np.int64), f32(4, 3)),
        ValueError, r"scatter_planes_: index must have one row per plane of target \(4\)"),
    "scatter_planes_ values shape": (
        lambda: scatter.scatter_planes_(zeros(2, 5, 3), np.zeros((2, 4), np.int64),
                                        f32(2, 4, 2)),
        ValueError, r"scatter_planes_: values must have shape \(2, 4, 3\), got \(2, 4, 2\)"),
    "scatter_planes_ strided target": (
        lambda: scatter.scatter_planes_(strided(2, 5), np.zeros((2, 3), np.int64), f32(2, 3)),
        ValueError, r"scatter_planes_: target must be C-contiguous"),
    "scatter_planes_ float index": (
        lambda: scatter.scatter_planes_(zeros(2, 5), np.zeros((2, 3)), f32(2, 3)),
        TypeError, r"scatter_planes_: index must hold integers, got dtype float64"),
    "scatter_add_rows_ index out of range": (
        lambda: scatter.scatter_add_rows_(zeros(4, 2), np.array([0, 7]), f32(2, 2)),
        IndexError, r"scatter_add_rows_: index 7 is out of range for 4 rows \(valid "
                    r"indices are -4 to 3\)"),
    "scatter_add_rows_ uint64 beyond int64": (
        lambda: scatter.scatter_add_rows_(zeros(4, 2), np.array([2 ** 64 - 1], np.uint64),
                                          f32(1, 2)),
        IndexError, r"scatter_add_rows_: index 18446744073709551615 is out of range"),
    "scatter_add_rows_ strided target": (
        lambda: scatter.scatter_add_rows_(strided(4, 2), np.array([0]), f32(1, 2)),
        ValueError, r"scatter_add_rows_: target must be C-contiguous"),
    "scatter_add_rows_ values rows": (
        lambda: scatter.scatter_add_rows_(zeros(4, 2), np.array([0, 1, 2]), f32(1, 2)),
        ValueError, r"scatter_add_rows_: values must have shape \(3, 2\), got \(1, 2\)"),
    # max pooling: windows inside the input, indices inside their plane
    "max_pool2d_numba output too large": (
        lambda: pooling.max_pool2d_numba(f32(2, 6, 6), (2, 2), (2, 2), (0, 0), (1, 1),
                                          (9, 3)),
        ValueError, r"max_pool2d_numba: output size \(9, 3\) does not fit input size "
                    r"\(6, 6\)"),
    "max_pool2d_numba window in padding only": (
        lambda: pooling.max_pool2d_numba(f32(2, 6, 6), (2, 2), (1, 1), (4, 0), (1, 1),
                                          (3, 5)),
        ValueError, r"max_pool2d_numba: a window of axis 0 has no tap inside the input"),
    "max_pool2d_numba stride 0": (
        lambda: pooling.max_pool2d_numba(f32(2, 6, 6), (2, 2), (0, 2), (0, 0), (1, 1),
                                          (3, 3)),
        ValueError, r"max_pool2d_numba: stride must hold ints in \[1, "),
    "max_pool2d_numba float kernel size": (
        lambda: pooling.max_pool2d_numba(f32(2, 6, 6), (2.0, 2), (2, 2), (0, 0), (1, 1),
                                          (3, 3)),
        TypeError, r"max_pool2d_numba: kernel size must hold ints, got float 2.0"),
    "max_values2d_numba output too large": (
        lambda: pooling.max_values2d_numba(f32(2, 6, 6), (2, 2), (2, 2), (0, 0), (1, 1),
                                            (9, 3)),
        ValueError, r"max_values2d_numba: output size \(9, 3\) does not fit input size "
                    r"\(6, 6\)"),
    "max_values2d_numba window in padding only": (
        lambda: pooling.max_values2d_numba(f32(2, 6, 6), (2, 2), (1, 1), (0, 4), (1, 1),
                                            (5, 3)),
        ValueError, r"max_values2d_numba: a window of axis 1 has no tap inside the input"),
    "scatter_add_rows index out of range": (
        lambda: pooling.scatter_add_rows(f32(3, 4), np.full((3, 4), 9), 9),
        IndexError, r"scatter_add_rows: index 9 is out of range for 9 rows"),
    "scatter_add_rows shapes": (
        lambda: pooling.scatter_add_rows(f32(3, 4), np.zeros((3, 5), np.int64), 9),
        ValueError, r"scatter_add_rows: g and idx must be \(rows, \.\.\.\) of one shape, got "
                    r"\(3, 4\) and \(3, 5\)"),
    # direct convolution: weight, channels, batch and output size against the geometry
    "direct_forward_numba kernel size": (
        lambda: conv_direct.direct_forward_numba(f32(1, 1, 12, 12), f32(2, 1, 3, 3),
                                                 zeros(1, 2, 8, 8), LENET, 1),
        ValueError, r"direct_forward_numba: shapes do not agree: input \(1, 1, 12, 12\), "
                    r"weight \(2, 1, 3, 3\) and output \(1, 2, 8, 8\) with groups=1 and "
                    r"kernel \(5, 5\)"),
    "direct_forward_numba channels": (
        lambda: conv_direct.direct_forward_numba(f32(1, 1, 8, 8), f32(2, 3, 3, 3),
                                                 zeros(1, 2, 8, 8), PADDED, 1),
        ValueError, r"direct_forward_numba: shapes do not agree"),
    "direct_forward_numba groups": (
        lambda: conv_direct.direct_forward_numba(f32(1, 4, 8, 8), f32(3, 2, 3, 3),
                                                 zeros(1, 3, 8, 8), PADDED, 2),
        ValueError, r"groups=2"),
    "direct_forward_numba output rows": (
        lambda: conv_direct.direct_forward_numba(f32(1, 1, 12, 12), f32(2, 1, 5, 5),
                                                 zeros(1, 2, 30, 8), LENET, 1),
        ValueError, r"direct_forward_numba: output size \(30, 8\) does not fit input size "
                    r"\(12, 12\)"),
    "direct_forward_numba geo length": (
        lambda: conv_direct.direct_forward_numba(f32(1, 1, 12, 12), f32(2, 1, 5, 5),
                                                 zeros(1, 2, 8, 8), LENET[:6], 1),
        ValueError, r"direct_forward_numba: geo must hold 8 ints, got 6"),
    "direct_grad_input_numba batch": (
        lambda: conv_direct.direct_grad_input_numba(f32(3, 2, 8, 8), f32(2, 1, 5, 5),
                                                    zeros(1, 1, 12, 12), LENET, 1),
        ValueError, r"direct_grad_input_numba: shapes do not agree"),
    "direct_grad_weight_numba batch": (
        lambda: conv_direct.direct_grad_weight_numba(f32(1, 1, 12, 12), f32(4, 2, 8, 8),
                                                     zeros(2, 1, 5, 5), LENET, 1),
        ValueError, r"direct_grad_weight_numba: shapes do not agree"),
    "direct_grad_weight_numba dtypes": (
        lambda: conv_direct.direct_grad_weight_numba(f32(1, 1, 12, 12),
                                                     np.zeros((1, 2, 8, 8)),
                                                     zeros(2, 1, 5, 5), LENET, 1),
        TypeError, r"direct_grad_weight_numba: y must be float32, got dtype float64"),
    # im2col / col2im: the column matrix the kernels write by unsigned offsets
    "im2col_numba short col": (
        lambda: im2col.im2col_numba(f32(2, 3, 1, 4, 4), zeros(9, 2, 16), GEO15),
        ValueError, r"im2col_numba: col must have shape \(27, 2, 16\), got \(9, 2, 16\)"),
    "im2col_numba stride 0": (
        lambda: im2col.im2col_numba(f32(2, 3, 1, 4, 4), zeros(27, 2, 16),
                                    GEO15[:4] + (0,) + GEO15[5:]),
        ValueError, r"im2col_numba: stride must hold ints in \[1, "),
    "im2col_numba output too large": (
        lambda: im2col.im2col_numba(f32(2, 3, 1, 4, 4), zeros(27, 2, 64),
                                    GEO15[:13] + (8, 8)),
        ValueError, r"im2col_numba: output size \(1, 8, 8\) does not fit input size "
                    r"\(1, 4, 4\)"),
    "col2im_numba fewer rows (groups)": (
        lambda: im2col.col2im_numba(f32(18, 2, 16), zeros(2, 3, 1, 4, 4), GEO15),
        ValueError, r"col2im_numba: col must have shape \(27, 2, 16\), got \(18, 2, 16\)"),
    "col2im_numba strided x": (
        lambda: im2col.col2im_numba(f32(27, 2, 16),
                                    np.zeros((2, 3, 1, 4, 8), np.float32)[..., ::2], GEO15),
        ValueError, r"col2im_numba: x must be C-contiguous"),
    # Winograd tiles: (alpha^2, C, N * th * tw)
    "tiles_in_numba short out": (
        lambda: winograd.tiles_in_numba(f32(2, 3, 8, 8), winograd.winograd_matrices(2)[2]
                                        .astype(np.float32), zeros(16, 3, 8), 2, 1, 1, 4, 4),
        ValueError, r"tiles_in_numba: tiles must have shape \(16, 3, 32\), got \(16, 3, 8\)"),
    "tiles_in_numba step 0": (
        lambda: winograd.tiles_in_numba(f32(2, 3, 8, 8), winograd.winograd_matrices(2)[2]
                                        .astype(np.float32), zeros(16, 3, 32), 0, 1, 1, 4, 4),
        ValueError, r"tiles_in_numba: step, the tile counts and T's sizes must be at least 1"),
    "tiles_out_numba short V": (
        lambda: winograd.tiles_out_numba(f32(16, 3, 8), winograd.winograd_matrices(2)[0]
                                         .astype(np.float32), zeros(2, 3, 8, 8), 2, 0, 0,
                                         4, 4),
        ValueError, r"tiles_out_numba: tiles must have shape \(16, 3, 32\)"),
    "tiles_in_numba strided out": (          # the kernel writes whole rows of it
        lambda: winograd.tiles_in_numba(f32(2, 3, 8, 8), winograd.winograd_matrices(2)[2]
                                        .astype(np.float32), zeros(16, 3, 64)[:, :, ::2],
                                        2, 1, 1, 4, 4),
        ValueError, r"tiles_in_numba: out must be C-contiguous"),
    "tiles_out_numba strided V": (
        lambda: winograd.tiles_out_numba(f32(16, 3, 64)[:, :, ::2],
                                         winograd.winograd_matrices(2)[0].astype(np.float32),
                                         zeros(2, 3, 8, 8), 2, 0, 0, 4, 4),
        ValueError, r"tiles_out_numba: V must be C-contiguous"),
    # attention: k's depth, v's keys, P's and dO's shapes, row layout
    "attention_forward k depth": (
        lambda: attention.attention_forward(f32(2, 8, 64), f32(2, 8, 4), f32(2, 8, 16),
                                            0.1, False),
        ValueError, r"attention_forward: q, k and v must be non-empty \(\.\.\., L, E\)"),
    "attention_forward v keys": (
        lambda: attention.attention_forward(f32(2, 8, 16), f32(2, 64, 16), f32(2, 4, 16),
                                            0.1, False),
        ValueError, r"got \(2, 8, 16\), \(2, 64, 16\) and \(2, 4, 16\)"),
    "attention_forward float64": (
        lambda: attention.attention_forward(np.ones((2, 4, 8)), f32(2, 4, 8), f32(2, 4, 8),
                                            0.1, False),
        TypeError, r"attention_forward: q must be float32, got dtype float64"),
    "attention_forward strided rows": (
        lambda: attention.attention_forward(strided(2, 4, 8), f32(2, 4, 8), f32(2, 4, 8),
                                            0.1, False),
        ValueError, r"attention_forward: q must have contiguous rows"),
    "attention_backward small P": (
        lambda: attention.attention_backward(f32(2, 8, 16), f32(2, 8, 16), f32(2, 8, 16),
                                             f32(1, 8, 8), f32(2, 8, 16), 0.1),
        ValueError, r"attention_backward: p must have shape \(2, 8, 8\), got \(1, 8, 8\)"),
    "attention_backward small dO": (
        lambda: attention.attention_backward(f32(2, 8, 16), f32(2, 8, 16), f32(2, 8, 16),
                                             f32(2, 8, 8), f32(2, 2, 16), 0.1),
        ValueError, r"attention_backward: do must have shape \(2, 8, 16\)"),
    "attention_backward strided P": (
        lambda: attention.attention_backward(f32(2, 8, 16), f32(2, 8, 16), f32(2, 8, 16),
                                             strided(2, 8, 8), f32(2, 8, 16), 0.1),
        ValueError, r"attention_backward: p must be C-contiguous"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_wrapper_refuses_before_the_kernel_runs(case):
    call, error, message = CASES[case]
    with pytest.raises(error, match=message):
        call()


def test_frombuffer_pieces_are_left_to_the_copy():
    """A buffer's pieces that NumPy views over a bytes object: no ``base`` chain to walk
    (it raised AttributeError); they join as any others."""
    buf = np.frombuffer(np.arange(12, dtype=np.float32).tobytes(), np.float32).reshape(4, 3)
    joined = join.adjacent_join([buf[:1], buf[1:]], 0)
    np.testing.assert_array_equal(joined, buf)


def test_adjacent_join_names_an_axis_out_of_range():
    buf = np.zeros((4, 3), np.float32)
    with pytest.raises(ValueError, match=r"adjacent_join: axis 2 is out of range for arrays "
                                         r"of 2 dims"):
        join.adjacent_join([buf[:1], buf[1:]], 2)


def test_even_kernel_same_padding_takes_the_general_direct_kernels():
    """'same' padding of an even kernel pads only the high side; the wide-row kernels
    (meant for unpadded input) read past each plane there: the direct algorithm gave
    values like 7e30.  It now equals im2col, forward and both gradients."""
    x0, w0 = f32(2, 3, 7, 6), f32(4, 3, 2, 2)      # padding (0, 0) low, (1, 1) high
    out = {}
    for algo in ("direct", "im2col"):
        x, w = lz.Variable(x0.copy()), lz.Variable(w0.copy())
        y = F.conv2d(x, w, padding="same", algo=algo)
        (y * y).sum().backward()
        out[algo] = (y.data, x.grad.data, w.grad.data)
    for got, want in zip(out["direct"], out["im2col"]):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
