"""Convolution: the operators, the geometry, the algorithms and how one is chosen.

    operators   conv1d/2d/3d, conv_transpose1d/2d/3d, unfold, fold, conv_explain: the
                public wrappers, which validate every argument before any kernel runs
    functions   the autograd Functions (Conv, ConvGradInput, ConvGradWeight, Unfold, Fold)
    geometry    argument parsing, output sizes (ConvGeometry, ConvProblem)
    algorithm   the Algorithm interface, the forward/backward cache, scratch buffers
    machine     the machine model the algorithms' predicted times are built from
    im2col      patch matrix + GEMM (any geometry)
    winograd    F(2x2,3x3) and F(4x4,3x3)
    fft         frequency-domain products (large kernels)
    direct      1x1 as a GEMM, depthwise and few-channel layers as a loop over taps
    parallel    one product split over the batch, one part per thread

Choosing an algorithm is a one-way chain, each module importing only those before it:

    registry  <-  cost_model  <-  autotune  <-  select   (explain: conv_explain's table)

``registry`` lists the algorithms, ``cost_model`` picks the lowest predicted time,
``autotune`` measures once per shape bucket (``Config.conv_autotune``) and remembers the
winner in a JSON file, ``select`` answers ``algo=`` for the Functions.
"""
from lezero.functions.conv.operators import *   # noqa: F401,F403
from lezero.functions.conv.operators import __all__  # noqa: F401
# for inference fusion: its folded weights keep their transforms between calls, and its
# convolution runs the forward product without a Function where no hook watches
from lezero.functions.conv.algorithm import declare_fixed  # noqa: F401,E402
from lezero.functions.conv.functions import forward_product  # noqa: F401,E402
from lezero.functions.conv.geometry import conv_geometry  # noqa: F401,E402
