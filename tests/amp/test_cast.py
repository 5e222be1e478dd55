"""amp.cast (the Cast Function) and the fast float16 conversion kernels."""
import numpy as np
import pytest
import torch

import lezero as lz
from lezero import amp
from lezero.amp.convert import convert
from lezero.testing import check_double_backward, check_gradient, check_torch


def test_cast_gradient_double_backward_and_torch():
    x = np.random.default_rng(0).uniform(-1, 1, (3, 4))
    check_gradient(lambda v: amp.cast(v * v, np.float32) * 2, x, rtol=1e-3, atol=1e-4,
                   eps=1e-3)
    check_double_backward(lambda v: amp.cast(v, np.float32) ** 3, x, rtol=1e-3, atol=1e-3,
                          eps=1e-3)
    check_torch(lambda v: amp.cast(v, np.float16), lambda t: t.to(torch.float16),
                x.astype(np.float32), rtol=1e-3, atol=1e-3)


def test_cast_is_identity_for_its_own_dtype_and_rejects_arrays():
    v = lz.Variable(np.ones(2, np.float32))
    assert amp.cast(v, np.float32) is v
    assert amp.cast(v, "float16").dtype == np.float16
    with pytest.raises(TypeError, match="amp.cast: x must be Variable"):
        amp.cast(np.ones(2), np.float16)


def _awkward(n, seed):
    rng = np.random.default_rng(seed)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 65504, 65519.99, 65520, 7e4,
                        2 ** -25, 2 ** -25 * 1.0000001, 2 ** -24, 2 ** -14, 2 ** -14 * 0.9999,
                        1 + 2 ** -11, 1 + 3 * 2 ** -11, -3e-5, 1 / 3], np.float32)
    scaled = rng.standard_normal(n) * 10.0 ** rng.integers(-9, 6, n)
    bits = np.frombuffer(rng.integers(0, 2 ** 32, n, dtype=np.uint32).tobytes(), np.float32)
    return np.concatenate([special, scaled.astype(np.float32), bits])


def test_numba_conversion_is_bit_identical_to_astype():
    a = _awkward(20000, 0)
    with np.errstate(all="ignore"):
        want = a.astype(np.float16)
    got = convert(a, np.float16)
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))
    every = np.arange(65536, dtype=np.uint16).view(np.float16)
    np.testing.assert_array_equal(convert(every, np.float32).view(np.uint32),
                                  every.astype(np.float32).view(np.uint32))
    with lz.using_config("use_numba", False):          # the reference path
        np.testing.assert_array_equal(convert(a, np.float16).view(np.uint16),
                                      want.view(np.uint16))


def test_bfloat16_upcast_is_exact():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    with np.errstate(all="ignore"):
        b = _awkward(5000, 1).astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(convert(b, np.float32).view(np.uint32),
                                  b.astype(np.float32).view(np.uint32))
