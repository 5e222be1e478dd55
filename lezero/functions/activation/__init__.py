"""Activation functions, with ``torch.nn.functional``'s names, arguments and defaults.

The family, re-exported here:

* ``piecewise``  relu relu6 leaky_relu hardtanh hardsigmoid hardswish prelu
* ``smooth``     elu selu celu sigmoid logsigmoid softplus silu mish softsign tanhshrink glu
* ``gaussian``   gelu (two fused Functions, a Numba kernel for float32)
* ``normalized`` softmax log_softmax gumbel_softmax
* ``shrink``     hardshrink softshrink threshold rrelu

The elementwise ones are ``Elementwise`` subclasses (``lezero.functions.math``): a value on
raw arrays and a gradient written with LeZero operators, so every activation can be
differentiated again, to any order.
"""
from lezero.functions.activation import (gaussian as _gaussian, normalized as _normalized,
                                         piecewise as _piecewise, shrink as _shrink,
                                         smooth as _smooth)
from lezero.functions.activation.gaussian import *        # noqa: F401,F403
from lezero.functions.activation.piecewise import *   # noqa: F401,F403
from lezero.functions.activation.shrink import *      # noqa: F401,F403
from lezero.functions.activation.smooth import *      # noqa: F401,F403
from lezero.functions.activation.normalized import *     # noqa: F401,F403

__all__ = (_piecewise.__all__ + _smooth.__all__ + _gaussian.__all__ + _normalized.__all__
           + _shrink.__all__)
