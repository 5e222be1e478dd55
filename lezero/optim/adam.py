"""The Adam family: Adam (with AMSGrad), AdamW, Adamax and NAdam.

Each keeps exponential moving averages of the gradient (``exp_avg``) and of its square or
its magnitude, corrects them for their zero start, and steps along their ratio.  The update
order and the place where ``eps`` enters follow PyTorch exactly, so that ten steps agree
with ``torch.optim`` to rounding.
"""
from lezero import cuda
from lezero.kernels import adam as adam_kernels
from lezero.optim.optimizer import Optimizer, effective_grad, init_state, lerp_, square_avg_
from lezero.optim.state_checks import COUNT, FRACTION, PARAM


class _AdamBase(Optimizer):
    """Shared checks and weight decay for the Adam family."""

    def _check_group(self, group, index):
        super()._check_group(group, index)
        self._require_nonnegative(group, index, "eps", "weight_decay")
        self._check_betas(group, index)

    @staticmethod
    def _decayed_grad(param, grad, h):
        """Apply weight decay: decoupled (``p *= 1 - lr * wd``, AdamW) or as an L2 term."""
        wd = h["weight_decay"]
        if wd and h.get("decoupled_weight_decay"):
            param *= 1.0 - h["lr"] * wd
            wd = 0
        return effective_grad(grad, param, wd, h["maximize"])


class Adam(_AdamBase):
    """``Adam(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False,
    *, maximize=False, decoupled_weight_decay=False)``::

        m = beta1 m + (1 - beta1) g          v = beta2 v + (1 - beta2) g^2
        v_max = max(v_max, v)                (amsgrad)
        p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)

    ``weight_decay`` adds ``wd * p`` to the gradient (L2) unless
    ``decoupled_weight_decay=True``, which makes it AdamW.
    """

    state_spec = {"step": COUNT, "exp_avg": PARAM, "exp_avg_sq": PARAM,
                  "max_exp_avg_sq": PARAM}
    required_state = ("step", "exp_avg", "exp_avg_sq")

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False, *, maximize=False, decoupled_weight_decay=False):
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        amsgrad=amsgrad, maximize=maximize,
                        decoupled_weight_decay=decoupled_weight_decay)
        super().__init__(params, defaults)

    def _update(self, param, grad, state, h):
        beta1, beta2 = h["betas"]
        init_state(state, param, "exp_avg", "exp_avg_sq",
                   *(("max_exp_avg_sq",) if h["amsgrad"] else ()), step=0)
        state["step"] += 1
        t = state["step"]
        if h["amsgrad"] and "max_exp_avg_sq" not in state:
            # amsgrad switched on mid-run: start from the current v
            state["max_exp_avg_sq"] = state["exp_avg_sq"].copy()
        adam_kernels.adam_step_(
            param, grad, state["exp_avg"], state["exp_avg_sq"],
            state["max_exp_avg_sq"] if h["amsgrad"] else None, lr=h["lr"], beta1=beta1,
            beta2=beta2, eps=h["eps"], weight_decay=h["weight_decay"],
            decoupled=bool(h.get("decoupled_weight_decay")), maximize=h["maximize"], step=t)


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter): ``p *= 1 - lr * wd`` before
    the Adam step.  ``AdamW(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
    weight_decay=1e-2, amsgrad=False, *, maximize=False)``."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, *, maximize=False):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                         amsgrad=amsgrad, maximize=maximize, decoupled_weight_decay=True)


class Adamax(_AdamBase):
    """Adam with the infinity norm: ``Adamax(params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8,
    weight_decay=0, *, maximize=False)``::

        m = beta1 m + (1 - beta1) g          u = max(beta2 u, |g| + eps)
        p -= lr / (1 - beta1^t) * m / u
    """

    state_spec = {"step": COUNT, "exp_avg": PARAM, "exp_inf": PARAM}
    required_state = ("step", "exp_avg", "exp_inf")

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, *,
                 maximize=False):
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        maximize=maximize)
        super().__init__(params, defaults)

    def _update(self, param, grad, state, h):
        xp = cuda.get_array_module(param)
        beta1, beta2 = h["betas"]
        init_state(state, param, "exp_avg", "exp_inf", step=0)
        state["step"] += 1
        g, _ = self._decayed_grad(param, grad, h)
        exp_avg, exp_inf = state["exp_avg"], state["exp_inf"]
        scratch = xp.empty_like(param)
        lerp_(exp_avg, g, 1.0 - beta1, scratch)
        xp.abs(g, out=scratch)
        scratch += h["eps"]
        exp_inf *= beta2
        xp.maximum(exp_inf, scratch, out=exp_inf)
        xp.divide(exp_avg, exp_inf, out=scratch)
        scratch *= -h["lr"] / (1.0 - beta1 ** state["step"])
        param += scratch


class NAdam(_AdamBase):
    """Adam with Nesterov momentum (Dozat): ``NAdam(params, lr=2e-3, betas=(0.9, 0.999),
    eps=1e-8, weight_decay=0, momentum_decay=4e-3, decoupled_weight_decay=False, *,
    maximize=False)``.

    The momentum coefficient warms up as ``mu_t = beta1 (1 - 0.5 * 0.96^(t psi))`` and the
    step mixes the current gradient and the look-ahead average::

        p -= lr (1 - mu_t) / (1 - prod mu_1..t) * g / d
           + lr mu_{t+1} / (1 - prod mu_1..t+1) * m / d,   d = sqrt(v / (1 - beta2^t)) + eps
    """

    state_spec = {"step": COUNT, "mu_product": FRACTION, "exp_avg": PARAM, "exp_avg_sq": PARAM}
    required_state = ("step", "mu_product", "exp_avg", "exp_avg_sq")

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 momentum_decay=4e-3, decoupled_weight_decay=False, *, maximize=False):
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        momentum_decay=momentum_decay,
                        decoupled_weight_decay=decoupled_weight_decay, maximize=maximize)
        super().__init__(params, defaults)

    def _check_group(self, group, index):
        super()._check_group(group, index)
        self._require_nonnegative(group, index, "momentum_decay")

    def _update(self, param, grad, state, h):
        xp = cuda.get_array_module(param)
        beta1, beta2 = h["betas"]
        init_state(state, param, "exp_avg", "exp_avg_sq", step=0, mu_product=1.0)
        state["step"] += 1
        t = state["step"]
        g, owned = self._decayed_grad(param, grad, h)
        psi = h["momentum_decay"]
        mu = beta1 * (1.0 - 0.5 * 0.96 ** (t * psi))
        mu_next = beta1 * (1.0 - 0.5 * 0.96 ** ((t + 1) * psi))
        state["mu_product"] *= mu
        mu_product = state["mu_product"]
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        scratch = xp.empty_like(param)
        lerp_(exp_avg, g, 1.0 - beta1, scratch)
        square_avg_(exp_avg_sq, g, beta2, scratch)
        denom = xp.divide(exp_avg_sq, 1.0 - beta2 ** t, out=scratch)
        xp.sqrt(denom, out=denom)
        denom += h["eps"]
        # the gradient part of the step (reusing g's memory when it is ours)
        g_part = xp.divide(g, denom, out=g if owned else xp.empty_like(param))
        g_part *= -h["lr"] * (1.0 - mu) / (1.0 - mu_product)
        param += g_part
        # the momentum part, written into denom's memory once it is no longer needed
        xp.divide(exp_avg, denom, out=denom)
        denom *= -h["lr"] * mu_next / (1.0 - mu_product * mu_next)
        param += denom
