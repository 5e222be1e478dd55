"""Per-coordinate step sizes from the history of squared gradients: Adagrad, RMSprop and
Adadelta (PyTorch's update order and eps placement)."""
from lezero import cuda
from lezero.optim.optimizer import (Optimizer, add_scaled, effective_grad, init_state, lerp_,
                                    square_avg_)
from lezero.optim.state_checks import COUNT, PARAM


class _SquaredHistory(Optimizer):
    """Checks shared by the three rules."""

    def _check_group(self, group, index):
        super()._check_group(group, index)
        self._require_nonnegative(group, index, "eps", "weight_decay")


class Adagrad(_SquaredHistory):
    """``Adagrad(params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0,
    eps=1e-10, *, maximize=False)``::

        s += g^2
        p -= lr / (1 + (t - 1) lr_decay) * g / (sqrt(s) + eps)

    As in PyTorch, the state (``step`` and ``sum``) exists from construction on.
    """

    state_spec = {"step": COUNT, "sum": PARAM}
    required_state = ("step", "sum")

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0,
                 initial_accumulator_value=0, eps=1e-10, *, maximize=False):
        defaults = dict(lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, eps=eps,
                        maximize=maximize)
        super().__init__(params, defaults)

    def _check_group(self, group, index):
        super()._check_group(group, index)
        self._require_nonnegative(group, index, "lr_decay")
        self._require(group, index, "initial_accumulator_value",
                      group["initial_accumulator_value"] >= 0, ">= 0")

    def _init_group_state(self, group):
        for p in group["params"]:
            self.state[p] = self._fresh_state(p.data, group["initial_accumulator_value"])

    @staticmethod
    def _fresh_state(param, initial):
        xp = cuda.get_array_module(param)
        return {"step": 0, "sum": xp.full_like(param, initial)}

    def _update(self, param, grad, state, h):
        if not state:        # a parameter whose state was dropped by load_state_dict
            state.update(self._fresh_state(param, h["initial_accumulator_value"]))
        xp = cuda.get_array_module(param)
        state["step"] += 1
        g, owned = effective_grad(grad, param, h["weight_decay"], h["maximize"])
        clr = h["lr"] / (1.0 + (state["step"] - 1) * h["lr_decay"])
        total = state["sum"]
        std = xp.multiply(g, g, out=xp.empty_like(param))
        total += std
        xp.sqrt(total, out=std)
        std += h["eps"]
        xp.divide(g, std, out=std)
        add_scaled(param, std, -clr, owned=True)


class RMSprop(_SquaredHistory):
    """``RMSprop(params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0,
    centered=False, *, maximize=False)``::

        v = alpha v + (1 - alpha) g^2
        a = sqrt(v - gbar^2) + eps,  gbar = alpha gbar + (1 - alpha) g   (centered)
        a = sqrt(v) + eps                                                (otherwise)
        buf = momentum buf + g / a;  p -= lr buf     (momentum > 0)
        p -= lr g / a                                (otherwise)
    """

    state_spec = {"step": COUNT, "square_avg": PARAM, "momentum_buffer": PARAM,
                  "grad_avg": PARAM}
    required_state = ("step", "square_avg")

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0,
                 centered=False, *, maximize=False):
        defaults = dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay,
                        momentum=momentum, centered=centered, maximize=maximize)
        super().__init__(params, defaults)

    def _check_group(self, group, index):
        super()._check_group(group, index)
        self._require_nonnegative(group, index, "momentum", "alpha")

    def _update(self, param, grad, state, h):
        xp = cuda.get_array_module(param)
        alpha, momentum = h["alpha"], h["momentum"]
        init_state(state, param, "square_avg", step=0)
        if momentum > 0 and "momentum_buffer" not in state:
            state["momentum_buffer"] = xp.zeros_like(param)
        if h["centered"] and "grad_avg" not in state:
            state["grad_avg"] = xp.zeros_like(param)
        state["step"] += 1
        g, owned = effective_grad(grad, param, h["weight_decay"], h["maximize"])
        square_avg = state["square_avg"]
        avg = xp.empty_like(param)
        square_avg_(square_avg, g, alpha, avg)
        if h["centered"]:
            grad_avg = state["grad_avg"]
            lerp_(grad_avg, g, 1.0 - alpha, avg)
            xp.multiply(grad_avg, grad_avg, out=avg)
            xp.subtract(square_avg, avg, out=avg)
            xp.sqrt(avg, out=avg)
        else:
            xp.sqrt(square_avg, out=avg)
        avg += h["eps"]
        xp.divide(g, avg, out=avg)           # avg now holds g / a
        if momentum > 0:
            buf = state["momentum_buffer"]
            buf *= momentum
            buf += avg
            add_scaled(param, buf, -h["lr"], owned=False)
        else:
            add_scaled(param, avg, -h["lr"], owned=True)


class Adadelta(_SquaredHistory):
    """``Adadelta(params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, *, maximize=False)``::

        v = rho v + (1 - rho) g^2
        delta = sqrt(u + eps) / sqrt(v + eps) * g
        u = rho u + (1 - rho) delta^2
        p -= lr delta
    """

    state_spec = {"step": COUNT, "square_avg": PARAM, "acc_delta": PARAM}
    required_state = ("step", "square_avg", "acc_delta")

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, *, maximize=False):
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay,
                        maximize=maximize)
        super().__init__(params, defaults)

    def _check_group(self, group, index):
        super()._check_group(group, index)
        self._require(group, index, "rho", 0.0 <= group["rho"] <= 1.0, "in [0, 1]")

    def _update(self, param, grad, state, h):
        xp = cuda.get_array_module(param)
        rho, eps = h["rho"], h["eps"]
        init_state(state, param, "square_avg", "acc_delta", step=0)
        state["step"] += 1
        g, _ = effective_grad(grad, param, h["weight_decay"], h["maximize"])
        square_avg, acc_delta = state["square_avg"], state["acc_delta"]
        std = xp.empty_like(param)
        square_avg_(square_avg, g, rho, std)
        xp.add(square_avg, eps, out=std)
        xp.sqrt(std, out=std)
        delta = xp.add(acc_delta, eps, out=xp.empty_like(param))
        xp.sqrt(delta, out=delta)
        delta /= std
        delta *= g
        square_avg_(acc_delta, delta, rho, std)     # std is free again: the scratch
        add_scaled(param, delta, -h["lr"], owned=True)
