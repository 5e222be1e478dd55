"""Step 30: pooling and resizing.

Pooling summarises each window of a feature map: ``max_pool2d`` keeps the largest value
(and, with ``return_indices``, where it was), ``avg_pool2d`` the mean, ``lp_pool2d`` the
p-norm, and the adaptive pools choose the windows so the output has a given size.  The
gradient of max pooling goes only to each window's maximum (the first one on ties, as in
PyTorch); the gradient of average pooling is spread evenly.  ``max_unpool2d`` puts values
back where ``max_pool2d`` found them; ``interpolate`` resizes; ``pixel_shuffle`` trades
channels for resolution.
Run: python steps/step30.py
"""
import numpy as np

import lezero as lz
import lezero.functions as F

image = lz.Variable(np.array([[[[1, 2, 0, 5],
                                [3, 4, 6, 1],
                                [0, 1, 2, 2],
                                [7, 0, 3, 8]]]], dtype=np.float32))
print("image (1 x 1 x 4 x 4):\n", image.data[0, 0])

# Max pooling: 2x2 windows, stride 2.  Each output is its window's maximum.
pooled, where = F.max_pool2d(image, 2, return_indices=True)
print("max_pool2d(2):\n", pooled.data[0, 0])
print("flat indices h * W + w of the maxima:\n", where.data[0, 0])
assert pooled.data[0, 0].tolist() == [[4, 6], [7, 8]]

# Its gradient lands on the maxima only.
pooled.sum().backward()
print("gradient of sum(max_pool2d(image)):\n", image.grad.data[0, 0])
assert image.grad.data.sum() == 4

# max_unpool2d puts the maxima back in place, zeros elsewhere.
print("max_unpool2d(pooled):\n", F.max_unpool2d(pooled, where, 2).data[0, 0])

# Average pooling with padding: PyTorch counts the zero padding in the divisor unless
# count_include_pad=False.
with_pad = F.avg_pool2d(image, 3, stride=2, padding=1)
without = F.avg_pool2d(image, 3, stride=2, padding=1, count_include_pad=False)
print("avg_pool2d(3, stride 2, padding 1), padding counted:\n", with_pad.data[0, 0])
print("... padding not counted:\n", without.data[0, 0])
assert np.isclose(without.data[0, 0, 0, 0], (1 + 2 + 3 + 4) / 4)

# Adaptive pooling picks the windows: to 1 x 1 it is the global mean (or max).
print("adaptive_avg_pool2d to 1x1:", F.adaptive_avg_pool2d(image, 1).data.item(),
      "= mean", image.data.mean())
print("adaptive_max_pool2d to 3x3:\n", F.adaptive_max_pool2d(image, 3).data[0, 0])
print("lp_pool2d(p=2, 2x2): window L2 norms:\n", F.lp_pool2d(image, 2, 2).data[0, 0])

# Resizing a 2x2 image to 4x4.
small = np.array([[[[0, 1], [2, 3]]]], dtype=np.float32)
print("interpolate nearest x2:\n", F.interpolate(small, scale_factor=2).data[0, 0])
print("interpolate bilinear x2 (align_corners=False):\n",
      F.interpolate(small, scale_factor=2, mode="bilinear").data[0, 0])
print("interpolate bilinear to 3x3, align_corners=True:\n",
      F.interpolate(small, size=(3, 3), mode="bilinear", align_corners=True).data[0, 0])

# pixel_shuffle moves 4 channels of 2x2 into 1 channel of 4x4, and back.
channels = np.arange(16, dtype=np.float32).reshape(1, 4, 2, 2)
shuffled = F.pixel_shuffle(channels, 2)
print("pixel_shuffle of channels 0..3 (each 2x2):\n", shuffled.data[0, 0])
assert np.array_equal(F.pixel_unshuffle(shuffled, 2).data, channels)

# Every one of these operators passes the numerical gradient check.
x = np.random.default_rng(0).standard_normal((1, 2, 5, 5))
for name, fn in [("max_pool2d", lambda a: F.max_pool2d(a, 3, 2, 1)),
                 ("avg_pool2d", lambda a: F.avg_pool2d(a, 2, ceil_mode=True)),
                 ("adaptive_max_pool2d", lambda a: F.adaptive_max_pool2d(a, (2, 3))),
                 ("interpolate bilinear", lambda a: F.interpolate(a, size=(7, 4),
                                                                  mode="bilinear"))]:
    print(f"gradient_check {name}: {lz.utils.gradient_check(fn, x)}")
