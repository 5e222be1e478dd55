"""Convolution internals: geometry, the algorithms and how one is chosen.

    geometry     argument parsing, output sizes (ConvGeometry, ConvProblem)
    base         the Algorithm interface, scratch buffers, cost-model constants
    im2col       patch matrix + GEMM (any geometry)
    winograd     F(2x2,3x3) and F(4x4,3x3)
    fft          frequency-domain products (large kernels)
    direct       1x1 as a GEMM, depthwise as a loop over taps
    select       algo="auto": cost model, or autotuning when Config.conv_autotune is on
    autotune     measurements, the persistent JSON cache, conv_explain
    functions    the autograd Functions (Conv, ConvGradInput, ConvGradWeight, Unfold, Fold)

The public operators are in ``lezero.functions.conv``.
"""
from lezero.functions.conv.operators import *   # noqa: F401,F403,E402
from lezero.functions.conv.operators import __all__  # noqa: F401,E402
