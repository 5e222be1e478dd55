"""Transforms on NumPy images: values, shapes, randomness, errors."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lezero as lz
from lezero.data import DataLoader, TensorDataset
from lezero.data import transforms as T

torch = pytest.importorskip("torch")


def image(h=6, w=8, c=3, dtype=np.uint8):
    return (np.arange(h * w * c) % 251).astype(dtype).reshape(h, w, c)


def test_to_float_to_chw_normalize_like_torchvision():
    x = image()
    y = T.Compose([T.ToFloat(), T.ToCHW(), T.Normalize([0.5, 0.4, 0.3], [0.2, 0.25, 0.5])])(x)
    ref = (torch.from_numpy(x).permute(2, 0, 1).float() / 255)
    ref = (ref - torch.tensor([0.5, 0.4, 0.3])[:, None, None]) / \
        torch.tensor([0.2, 0.25, 0.5])[:, None, None]
    assert y.dtype == np.float32 and y.shape == (3, 6, 8)
    np.testing.assert_allclose(y, ref.numpy(), rtol=1e-5, atol=1e-6)
    assert T.ToCHW()(np.zeros((4, 5))).shape == (1, 4, 5)
    assert T.ToFloat(scale=False)(np.array([2], np.uint8))[0] == 2.0


def test_normalize_errors():
    with pytest.raises(TypeError, match="apply ToFloat first"):
        T.Normalize([0.5], [0.5])(np.zeros((1, 2, 2), np.uint8))
    with pytest.raises(ValueError, match=r"3 means for an image with 2 channels"):
        T.Normalize([0, 0, 0], [1, 1, 1])(np.zeros((2, 4, 4), np.float32))
    with pytest.raises(ValueError, match="std must not contain zeros"):
        T.Normalize([0], [0])


@settings(max_examples=30, deadline=None)
@given(h=st.integers(1, 12), w=st.integers(1, 12), oh=st.integers(1, 20), ow=st.integers(1, 20))
def test_resize_matches_torch_bilinear(h, w, oh, ow):
    x = np.random.default_rng(h * w).random((h, w, 2)).astype(np.float32)
    y = T.resize(x, (oh, ow))
    ref = torch.nn.functional.interpolate(torch.from_numpy(x).permute(2, 0, 1)[None],
                                          size=(oh, ow), mode="bilinear",
                                          align_corners=False)[0].permute(1, 2, 0).numpy()
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-6)


def test_resize_keeps_integer_dtype_and_aspect():
    x = image(10, 20)
    y = T.Resize(5)(x)
    assert y.shape == (5, 10, 3) and y.dtype == np.uint8
    assert T.Resize((3, 4), layout="CHW")(np.zeros((2, 8, 8), np.float32)).shape == (2, 3, 4)


def test_crops_and_flips():
    x = image()
    c = T.CenterCrop((2, 4))(x)
    np.testing.assert_array_equal(c, x[2:4, 2:6])
    np.testing.assert_array_equal(T.RandomHorizontalFlip(p=1.0)(x), x[:, ::-1])
    np.testing.assert_array_equal(T.RandomVerticalFlip(p=1.0)(x), x[::-1])
    np.testing.assert_array_equal(T.RandomHorizontalFlip(p=0.0)(x), x)
    chw = x.transpose(2, 0, 1)
    np.testing.assert_array_equal(T.RandomHorizontalFlip(1.0, layout="CHW")(chw),
                                  chw[:, :, ::-1])
    rng = np.random.default_rng(0)
    for _ in range(20):
        crop = T.RandomCrop(4, padding=2, generator=rng)(x)
        assert crop.shape == (4, 4, 3)
        padded = np.pad(x, ((2, 2), (2, 2), (0, 0)))
        found = any(np.array_equal(padded[i:i + 4, j:j + 4], crop)
                    for i in range(padded.shape[0] - 3) for j in range(padded.shape[1] - 3))
        assert found                       # the crop is a window of the padded image
    assert T.RandomCrop(10, pad_if_needed=True)(x).shape == (10, 10, 3)
    with pytest.raises(ValueError, match=r"crop \(10, 10\) is larger than the image \(6, 8\)"):
        T.RandomCrop(10)(x)
    np.testing.assert_array_equal(T.Pad((1, 2))(np.ones((2, 2))),
                                  np.pad(np.ones((2, 2)), ((2, 2), (1, 1))))
    with pytest.raises(ValueError, match="padding_mode"):
        T.Pad(1, padding_mode="wrap")(x)


def test_random_resized_crop_shape_and_range():
    x = image(30, 40).astype(np.float32)
    t = T.RandomResizedCrop((8, 12), scale=(0.2, 0.5), generator=np.random.default_rng(0))
    for _ in range(10):
        top, left, h, w = t.params(30, 40, np.random.default_rng(_))
        assert 0 <= top <= 30 - h and 0 <= left <= 40 - w
        assert 0.2 * 1200 * 0.6 <= h * w <= 0.5 * 1200 * 1.4    # rounding leaves slack
        y = t(x)
        assert y.shape == (8, 12, 3) and y.min() >= x.min() and y.max() <= x.max()
    with pytest.raises(ValueError, match="scale"):
        T.RandomResizedCrop(8, scale=(0.9, 0.1))


def test_random_transforms_use_the_batch_stream():
    """Inside a DataLoader, augmentation depends on the seed, not on the process."""
    flip = T.RandomHorizontalFlip()

    class Flipped(TensorDataset):
        def __getitem__(self, i):
            return flip(self.tensors[0][i])

    ds = Flipped(np.arange(40 * 2).reshape(40, 1, 2))
    a = np.concatenate(list(DataLoader(ds, batch_size=8, seed=3)))
    b = np.concatenate(list(DataLoader(ds, batch_size=8, seed=3)))
    np.testing.assert_array_equal(a, b)
    flipped = a[:, 0, 0] > a[:, 0, 1]
    assert 5 < flipped.sum() < 35           # about half of them
    lz.manual_seed(0)
    first = [flip(np.array([[0, 1]]))[0, 0] for _ in range(30)]
    lz.manual_seed(0)
    assert first == [flip(np.array([[0, 1]]))[0, 0] for _ in range(30)]


def test_random_apply_and_lambda():
    t = T.RandomApply([T.Lambda(lambda v: v + 1)], p=1.0)
    assert t(np.zeros(1))[0] == 1
    assert T.RandomApply([T.Lambda(lambda v: v + 1)], p=0.0)(np.zeros(1))[0] == 0
    with pytest.raises(ValueError, match="probability"):
        T.RandomApply([], p=2)
    with pytest.raises(TypeError, match="callable"):
        T.Compose([1])
