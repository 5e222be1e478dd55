"""Normalization operators, with ``torch.nn.functional``'s names, arguments and defaults.

* ``batch``      batch_norm, instance_norm (running statistics updated in place)
* ``layer``      layer_norm, group_norm, rms_norm
* ``local``      local_response_norm, normalize (compositions)
* ``normalize``  ``Normalize``, the fused Function behind the first five: statistics
                 computed once, backward from the saved statistics, double differentiable
* ``checks``     the argument checks they share
"""
from lezero.functions.normalization import batch as _batch, layer as _layer, local as _local
from lezero.functions.normalization.batch import *   # noqa: F401,F403
from lezero.functions.normalization.layer import *   # noqa: F401,F403
from lezero.functions.normalization.local import *   # noqa: F401,F403

__all__ = _batch.__all__ + _layer.__all__ + _local.__all__
