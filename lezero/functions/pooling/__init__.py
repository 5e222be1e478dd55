"""Pooling and resizing, with ``torch.nn.functional``'s names, arguments and layouts.

Inputs are ``(N, C, D, H, W)`` (or unbatched ``(C, D, H, W)``) for the 3-D ops,
``(N, C, H, W)`` (or ``(C, H, W)``) for the 2-D ops and ``(N, C, L)`` (or ``(C, L)``) for
the 1-D ops, which run as 2-D ops over a height of one.  The family, re-exported here:

* ``max``       max_pool1d/2d/3d, max_unpool1d/2d
* ``avg``       avg_pool1d/2d/3d, lp_pool1d/2d
* ``adaptive``  adaptive_avg_pool1d/2d/3d, adaptive_max_pool1d/2d/3d
* ``resize``    interpolate
* ``sampling``  grid_sample
* ``common``    argument checks, the output geometry, the index scatter/gather pair that
                carries max pooling's gradient

(pixel_shuffle and pixel_unshuffle, which the registry lists here, are shape operators:
``lezero.functions.shape``.)
"""
from lezero.functions.pooling import (adaptive as _adaptive, avg as _avg, max as _max,
                                      resize as _resize, sampling as _sampling)
from lezero.functions.pooling.adaptive import *   # noqa: F401,F403
from lezero.functions.pooling.avg import *        # noqa: F401,F403
from lezero.functions.pooling.max import *        # noqa: F401,F403
from lezero.functions.pooling.resize import *     # noqa: F401,F403
from lezero.functions.pooling.sampling import *   # noqa: F401,F403

__all__ = (_max.__all__ + _avg.__all__ + _adaptive.__all__ + _resize.__all__
           + _sampling.__all__)
