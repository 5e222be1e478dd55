"""The Swin Transformer against torchvision, its shifted-window attention included."""
import numpy as np
import pytest
import torch

import lezero as lz
from lezero.nn import models
from lezero.nn.models import swin as ours_swin
from tests.nn.models._parity import assert_close, check_default, check_pair, images, tv_models

SMALL = dict(patch_size=[4, 4], embed_dim=16, depths=[2, 2], num_heads=[2, 4],
             window_size=[4, 4], stochastic_depth_prob=0.0, num_classes=10)


def test_swin_t_default_configuration_matches_torchvision():
    # 32x32: 8x8 tokens padded to two 7x7 windows a side (shifted), then 4x4, 2x2, 1x1
    check_default("swin_t", 28_288_354)


@pytest.mark.parametrize("size", [32, 36])
def test_small_swin_matches_torchvision(size):
    # 32: 8x8 tokens, shifted 4x4 windows; 36: 9x9 tokens padded to 12x12, and a 5x5
    # second stage padded to 8x8
    ref = tv_models().SwinTransformer(**SMALL)
    check_pair(ref, models.SwinTransformer(**SMALL), images((2, 3, size, size)),
               "features.1.1.attn.relative_position_bias_table")


@pytest.mark.parametrize("shape, window, shift", [((2, 8, 8, 8), [4, 4], [2, 2]),
                                                  ((1, 5, 7, 8), [3, 4], [1, 2]),
                                                  ((1, 3, 3, 8), [4, 4], [2, 2])])
def test_shifted_window_attention_matches_torchvision(shape, window, shift):
    fn = tv_models().swin_transformer.shifted_window_attention
    rng = np.random.default_rng(0)
    c, heads, n = shape[-1], 2, window[0] * window[1]
    arrays = [rng.standard_normal(s).astype(np.float32) for s in
              (shape, (3 * c, c), (c, c), (1, heads, n, n), (3 * c,), (c,))]
    x, qkv_w, proj_w, bias, qkv_b, proj_b = arrays
    expected = fn(*(torch.from_numpy(a) for a in arrays[:4]), window, heads, shift,
                  qkv_bias=torch.from_numpy(qkv_b), proj_bias=torch.from_numpy(proj_b))
    xv = lz.Variable(x)
    got = ours_swin.shifted_window_attention(xv, qkv_w, proj_w, bias, window, heads, shift,
                                             qkv_bias=qkv_b, proj_bias=proj_b)
    assert_close(got.data, expected.numpy(), 1e-5, "output")
    xt = torch.from_numpy(x).requires_grad_()
    fn(xt, *(torch.from_numpy(a) for a in arrays[1:4]), window, heads, shift,
       qkv_bias=torch.from_numpy(qkv_b), proj_bias=torch.from_numpy(proj_b)).sum().backward()
    got.sum().backward()
    assert_close(xv.grad.data, xt.grad.numpy(), 1e-5, "input gradient")


def test_relative_position_index_is_torchvision_buffer():
    ref = tv_models().swin_transformer.ShiftedWindowAttention(8, [3, 5], [0, 0], 2)
    ours = ours_swin.ShiftedWindowAttention(8, [3, 5], [0, 0], 2)
    np.testing.assert_array_equal(ours.relative_position_index,
                                  ref.relative_position_index.numpy())
    assert ours.relative_position_index.dtype == np.int64


def test_swin_argument_errors():
    with pytest.raises(ValueError, match="dim \\(10\\) must be divisible by num_heads"):
        ours_swin.ShiftedWindowAttention(10, [4, 4], [0, 0], 3)
    with pytest.raises(ValueError, match="depths and num_heads must be"):
        models.SwinTransformer([4, 4], 16, [2, 2], [2], [4, 4])


@pytest.mark.gpu
def test_swin_and_stochastic_depth_on_the_gpu():
    import cupy
    net = models.SwinTransformer(**dict(SMALL, stochastic_depth_prob=0.5)).eval()
    x = images((2, 3, 36, 36))
    with lz.no_grad():
        expected = net(x).data
        net.to_gpu()
        got = net(cupy.asarray(x)).data
    assert isinstance(got, cupy.ndarray)
    assert_close(cupy.asnumpy(got), expected, 1e-4, "GPU output")
    net.train()
    out = net(cupy.asarray(x))              # stochastic depth draws on the device
    out.sum().backward()
    assert isinstance(net.head.weight.grad.data, cupy.ndarray)
