"""The depthwise algorithm through ``F.conv2d`` / ``F.conv1d``: parity with PyTorch in
float32 (forward and both gradients), central differences and double backward in
float64, what it refuses, and that the cost model picks it for MobileNet's layers."""
import numpy as np
import pytest
import torch.nn.functional as TF

import lezero as lz
import lezero.functions as F
from lezero.functions.conv import select
from lezero.functions.conv.geometry import ConvProblem, conv_geometry
from lezero.functions.conv.parallel import parts_for
from lezero.testing import check_double_backward, check_gradient, check_torch, rand
from tests.runtime.conftest import threaded  # noqa: F401

# (x shape, w shape, kwargs): channel multipliers 1 and 2, strides 1 and 2, a dilated
# 5x5, rows wider than the kernels' wide-row threshold
CASES = [
    ((2, 4, 9, 7), (4, 1, 3, 3), dict(padding=1, groups=4)),
    ((1, 3, 10, 9), (6, 1, 3, 3), dict(padding=1, stride=2, groups=3)),
    ((2, 2, 11, 12), (2, 1, 5, 5), dict(padding=(2, 3), dilation=2, groups=2)),
    ((1, 2, 5, 20), (2, 1, 3, 3), dict(padding=1, groups=2)),
]


@pytest.mark.parametrize("x_shape,w_shape,kw", CASES)
def test_depthwise_matches_torch_in_float32(x_shape, w_shape, kw):
    fn = lambda x, w, b: F.conv2d(x, w, b, algo="depthwise", **kw)      # noqa: E731
    tfn = lambda x, w, b: TF.conv2d(x, w, b, **kw)                       # noqa: E731
    arrays = [rand(*x_shape, seed=1), rand(*w_shape, seed=2), rand(w_shape[0], seed=3)]
    check_torch(fn, tfn, *[a.astype(np.float32) for a in arrays], rtol=1e-4, atol=2e-5)


@pytest.mark.parametrize("x_shape,w_shape,kw", CASES[:2])
def test_depthwise_gradients_by_central_differences(x_shape, w_shape, kw):
    fn = lambda x, w: F.conv2d(x, w, algo="depthwise", **kw)            # noqa: E731
    small = (1,) + x_shape[1:3] + (6,)
    check_gradient(fn, rand(*small, seed=4), rand(*w_shape, seed=5))
    check_double_backward(fn, rand(*small, seed=6), rand(*w_shape, seed=7))


def test_conv1d_runs_depthwise_as_one_row():
    kw = dict(padding=2, stride=2, groups=3)
    fn = lambda x, w: F.conv1d(x, w, algo="depthwise", **kw)            # noqa: E731
    x, w = rand(2, 3, 17, seed=8), rand(6, 1, 5, seed=9)
    check_torch(fn, lambda x, w: TF.conv1d(x, w, **kw), x.astype(np.float32),
                w.astype(np.float32), rtol=1e-4, atol=2e-5)
    check_gradient(fn, x[:1, :, :9], w)


def test_numpy_reference_path_gives_the_same_results():
    x = lz.Variable(rand(2, 4, 12, 12, dtype=np.float32))
    w = lz.Variable(rand(4, 1, 3, 3, dtype=np.float32, seed=1))
    outs = []
    for use in (True, False):
        with lz.using_config("use_numba", use):
            x.cleargrad(), w.cleargrad()
            y = F.conv2d(x, w, padding=1, stride=2, groups=4, algo="depthwise")
            (y * y).sum().backward()
            outs.append((y.data, x.grad.data, w.grad.data))
    for fast, slow in zip(*outs):
        np.testing.assert_allclose(fast, slow, rtol=1e-5, atol=1e-5)


def test_depthwise_refuses_other_groupings():
    x, w = rand(1, 4, 8, 8, dtype=np.float32), rand(4, 2, 3, 3, dtype=np.float32)
    with pytest.raises(ValueError, match=r"conv2d: algo='depthwise' needs a 1-D/2-D "
                                         r"convolution with groups == in_channels"):
        F.conv2d(x, w, groups=2, algo="depthwise")


def _problem(n, c, h, stride):
    geom = conv_geometry("t", (n, c, h, h), (c, 1, 3, 3), 2, stride, 1, 1, c)
    return ConvProblem(geom, n, c, c, "float32", "numpy")


@pytest.mark.parametrize("n,c,h,stride", [(1, 32, 112, 1), (8, 96, 112, 2), (1, 144, 56, 1),
                                          (8, 576, 14, 2), (1, 960, 7, 1)])
def test_cost_model_picks_depthwise_for_mobilenet_layers(n, c, h, stride):
    prob = _problem(n, c, h, stride)
    for op in ("forward", "grad_input", "grad_weight"):
        assert select.by_model(prob, op).name == "depthwise"


def test_batch_split_over_threads_gives_the_unsplit_result(threaded):  # noqa: F811
    """Split over the batch (one part per thread, serial kernels in each part), the
    products and the summed weight gradient equal the single call's."""
    from lezero.runtime import policy
    x = lz.Variable(rand(4, 6, 10, 10, dtype=np.float32))
    w = lz.Parameter(rand(6, 1, 3, 3, dtype=np.float32, seed=1))
    outs = []
    for threads, min_flops in ((1, policy.conv_min_part_flops), (2, 1)):
        with lz.using_config("conv_threads", threads), policy.using(conv_min_part_flops=min_flops):
            assert parts_for(_problem(4, 6, 10, 1)) == threads
            x.cleargrad(), w.cleargrad()
            y = F.conv2d(x, w, padding=1, groups=6)
            (y * y).sum().backward()
            outs.append((y.data, x.grad.data, w.grad.data))
    for single, split in zip(*outs):
        np.testing.assert_allclose(split, single, rtol=1e-5, atol=1e-5)
