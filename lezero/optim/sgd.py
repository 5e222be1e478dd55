"""Stochastic gradient descent with momentum, dampening, Nesterov and weight decay."""
from lezero import cuda
from lezero.kernels import axpy
from lezero.optim.optimizer import Optimizer, add_scaled, effective_grad
from lezero.optim.state_checks import PARAM_OR_NONE


class SGD(Optimizer):
    """``SGD(params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False,
    maximize=False)`` with PyTorch's update order::

        g = grad + weight_decay * p
        buf = g                                (first step)
        buf = momentum * buf + (1 - dampening) * g
        g = g + momentum * buf  (nesterov)   or   g = buf
        p = p - lr * g
    """

    state_spec = {"momentum_buffer": PARAM_OR_NONE}     # PyTorch may store None

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0,
                 nesterov=False, maximize=False):
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening,
                        weight_decay=weight_decay, nesterov=nesterov, maximize=maximize)
        super().__init__(params, defaults)

    def _check_group(self, group, index):
        super()._check_group(group, index)
        self._require_nonnegative(group, index, "momentum", "weight_decay")
        if group["nesterov"] and (group["momentum"] <= 0 or group["dampening"] != 0):
            raise ValueError(f"SGD: nesterov=True needs momentum > 0 and dampening == 0 "
                             f"(param group {index} has momentum={group['momentum']!r}, "
                             f"dampening={group['dampening']!r})")

    def _update(self, param, grad, state, h):
        xp = cuda.get_array_module(param)
        g, owned = effective_grad(grad, param, h["weight_decay"], h["maximize"])
        momentum = h["momentum"]
        if momentum:
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = state["momentum_buffer"] = xp.array(g, dtype=param.dtype, copy=True)
            else:
                axpy.axpby_(buf, momentum, g, 1.0 - h["dampening"])
            if h["nesterov"]:
                look_ahead = xp.multiply(buf, momentum, out=xp.empty_like(param))
                look_ahead += g
                g, owned = look_ahead, True
            else:
                g, owned = buf, False
        add_scaled(param, g, -h["lr"], owned)
