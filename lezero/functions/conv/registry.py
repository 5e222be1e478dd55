"""The table of convolution algorithms: the bottom of the selection chain

    registry  <-  cost_model  <-  autotune  <-  select      (explain sits beside select)

``ALGORITHMS`` maps each name ``algo=`` accepts to its (stateless) algorithm object;
``GROUPS`` names sets the cost model or autotuning picks from.
"""
from lezero.functions.conv.depthwise import Depthwise
from lezero.functions.conv.direct import Direct
from lezero.functions.conv.fft import FFT
from lezero.functions.conv.im2col import Im2col
from lezero.functions.conv.winograd import Winograd

ALGORITHMS = {a.name: a for a in (Im2col(), Winograd(2), Winograd(4), FFT(), Direct(),
                                  Depthwise())}
# "winograd" lets the cost model (or autotuning) pick the tile size.
GROUPS = {"winograd": ("winograd_4x4", "winograd_2x2")}
NAMES = ("auto",) + tuple(ALGORITHMS) + tuple(GROUPS)


def candidates(prob, names=None):
    """The algorithms (objects) that can run ``prob``, in registry order."""
    names = names or tuple(ALGORITHMS)
    return [ALGORITHMS[n] for n in names if ALGORITHMS[n].unsupported(prob) is None]
