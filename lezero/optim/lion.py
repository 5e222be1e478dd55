"""Lion (Chen et al. 2023, "Symbolic Discovery of Optimization Algorithms")."""
from lezero import cuda
from lezero.optim.optimizer import Optimizer, effective_grad, init_state, lerp_
from lezero.optim.state_checks import PARAM


class Lion(Optimizer):
    """``Lion(params, lr=1e-4, betas=(0.9, 0.99), weight_decay=0, *, maximize=False)``::

        c = beta1 m + (1 - beta1) g
        p = p - lr (sign(c) + wd p)
        m = beta2 m + (1 - beta2) g

    Every coordinate moves by exactly ``lr`` (the sign), so Lion wants a learning rate
    3-10x smaller than AdamW's and a correspondingly larger ``weight_decay``.  Only one
    buffer (``exp_avg``) is kept per parameter.
    """

    state_spec = {"exp_avg": PARAM}
    required_state = ("exp_avg",)

    def __init__(self, params, lr=1e-4, betas=(0.9, 0.99), weight_decay=0, *, maximize=False):
        defaults = dict(lr=lr, betas=tuple(betas), weight_decay=weight_decay,
                        maximize=maximize)
        super().__init__(params, defaults)

    def _check_group(self, group, index):
        super()._check_group(group, index)
        self._require_nonnegative(group, index, "weight_decay")
        self._check_betas(group, index)

    def _update(self, param, grad, state, h):
        xp = cuda.get_array_module(param)
        beta1, beta2 = h["betas"]
        init_state(state, param, "exp_avg")
        exp_avg = state["exp_avg"]
        g, _ = effective_grad(grad, param, 0, h["maximize"])
        if h["weight_decay"]:
            param *= 1.0 - h["lr"] * h["weight_decay"]
        c = xp.subtract(g, exp_avg, out=xp.empty_like(param))
        c *= 1.0 - beta1
        c += exp_avg
        xp.sign(c, out=c)
        c *= -h["lr"]
        param += c
        lerp_(exp_avg, g, 1.0 - beta2, c)
