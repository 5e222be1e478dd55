"""Learning-rate schedules that edit ``optimizer.param_groups[i]['lr']``, as in PyTorch.

Call ``scheduler.step()`` once per epoch (or per batch for OneCycleLR) *after*
``optimizer.step()``.  Constructing a scheduler already applies its epoch-0 rate.

Most schedules are written in PyTorch's "chainable" form: the new rate is computed from the
group's current ``'lr'`` (``lr * gamma``), not from a closed formula, so two schedulers can
act on one optimizer and an ``'lr'`` edited by hand carries through.  The sequence of rates
equals ``torch.optim.lr_scheduler``'s to rounding.

``state_dict()`` holds every attribute except the optimizer (plain numbers, lists and
dicts), so ``lz.save`` can write it next to the model and the optimizer.
"""
import math
import types
import warnings
from bisect import bisect_right

from lezero.optim.optimizer import Optimizer
from lezero.optim.scheduler_state import check_scheduler_state
from lezero.utils.checks import check_bool, check_choice, check_int, check_number, describe


def _per_group(name, optimizer, value, number=None):
    """One value per param group, from a scalar or a list of the right length; with
    ``number`` (the argument's name) each must be a number."""
    n = len(optimizer.param_groups)
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise ValueError(f"{name}: expected {n} values (one per param group), "
                             f"got {len(value)}")
        values = list(value)
    else:
        values = [value] * n
    if number is not None:
        values = [check_number(name.split()[0], number, v) for v in values]
    return values


def _check_optimizer(cls, optimizer):
    if not isinstance(optimizer, Optimizer):
        raise TypeError(f"{cls.__name__}: expected a lezero.optim.Optimizer, "
                        f"got {type(optimizer).__name__}")


class LRScheduler:
    """Base class: ``LRScheduler(optimizer, last_epoch=-1)``.

    Subclasses write ``get_lr()`` (the rates for ``self.last_epoch``, usually from the
    groups' current rates) and may write ``_closed_form_lr()`` (the rates straight from
    ``base_lrs``, used when ``step(epoch)`` jumps).  ``last_epoch=-1`` starts fresh and
    records each group's ``'initial_lr'``; another value resumes and needs it present.
    """

    def __init__(self, optimizer, last_epoch=-1):
        _check_optimizer(type(self), optimizer)
        check_int(type(self).__name__, "last_epoch", last_epoch)
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(f"{type(self).__name__}: param group {i} has no "
                                   f"'initial_lr', needed to resume at last_epoch={last_epoch}"
                                   " (load the optimizer state first, or pass last_epoch=-1)")
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._initial_step()

    def _initial_step(self):
        """Apply the rates of the first epoch (``last_epoch`` -1 -> 0)."""
        self._step_count = 0
        self._is_initial = True
        try:
            self.step()
        finally:
            self._is_initial = False

    def get_lr(self):
        """The rates for ``self.last_epoch``; use ``get_last_lr()`` to read them."""
        raise NotImplementedError

    def get_last_lr(self):
        """The rates the last ``step()`` set, one per param group."""
        return list(self._last_lr)

    def step(self, epoch=None):
        """Advance one epoch (``epoch`` jumps there instead; deprecated, as in PyTorch)."""
        self._step_count += 1
        if epoch is not None:
            warnings.warn(f"{type(self).__name__}.step(epoch) is deprecated: call step() "
                          "once per epoch", UserWarning, stacklevel=2)
        self._apply(epoch)

    def _apply(self, epoch=None):
        if epoch is None:
            self.last_epoch += 1
            lrs = self.get_lr()
        else:
            self.last_epoch = epoch
            closed = getattr(self, "_closed_form_lr", None)
            lrs = closed() if closed is not None else self.get_lr()
        for group, lr in zip(self.optimizer.param_groups, lrs):
            group["lr"] = lr
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def _current(self):
        return [group["lr"] for group in self.optimizer.param_groups]

    def state_dict(self):
        """Every attribute except the optimizer."""
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict):
        """Restore the attributes from ``state_dict()``: only those this scheduler has,
        each of the kind it has (``scheduler_state``); missing ones keep their values."""
        self.__dict__.update(check_scheduler_state(self, state_dict))


class LambdaLR(LRScheduler):
    """``lr = initial_lr * lr_lambda(epoch)``; ``lr_lambda`` is a function or one per group."""

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        _check_optimizer(type(self), optimizer)
        self.lr_lambdas = _per_group("LambdaLR lr_lambda", optimizer, lr_lambda)
        for fn in self.lr_lambdas:
            if not callable(fn):
                raise TypeError(f"LambdaLR: lr_lambda must be callable, got {type(fn).__name__}")
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        return [base * fn(self.last_epoch) for fn, base in zip(self.lr_lambdas, self.base_lrs)]

    def state_dict(self):
        """As the base class, but a lambda is code: only callable *objects* keep their
        attributes (PyTorch does the same); plain functions are stored as None."""
        state = super().state_dict()
        state["lr_lambdas"] = [None if _is_plain_function(fn) else dict(fn.__dict__)
                               for fn in self.lr_lambdas]
        return state

    def load_state_dict(self, state_dict):
        state = check_scheduler_state(self, state_dict, skip=("lr_lambdas",))
        saved = state_dict.get("lr_lambdas") or []
        if not isinstance(saved, (list, tuple)) or len(saved) > len(self.lr_lambdas) or any(
                a is not None and not (isinstance(a, dict) and all(map(_is_name, a)))
                for a in saved):
            raise ValueError("LambdaLR.load_state_dict: lr_lambdas must be a list of at most "
                             f"{len(self.lr_lambdas)} entries, each None or a dict of "
                             "attribute names")
        self.__dict__.update(state)
        for fn, attrs in zip(self.lr_lambdas, saved):
            if attrs is not None:
                fn.__dict__.update(attrs)


def _is_name(key):
    """An attribute name a callable object's state may set (not a dunder)."""
    return isinstance(key, str) and key.isidentifier() and not key.startswith("__")


def _is_plain_function(fn):
    return isinstance(fn, (types.FunctionType, types.BuiltinFunctionType, types.MethodType))


class StepLR(LRScheduler):
    """Multiply the rate by ``gamma`` every ``step_size`` epochs."""

    def __init__(self, optimizer, step_size, gamma=0.1, last_epoch=-1):
        check_int("StepLR", "step_size", step_size, low=1)
        self.step_size = step_size
        self.gamma = check_number("StepLR", "gamma", gamma)
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch == 0 or self.last_epoch % self.step_size:
            return self._current()
        return [lr * self.gamma for lr in self._current()]

    def _closed_form_lr(self):
        return [base * self.gamma ** (self.last_epoch // self.step_size)
                for base in self.base_lrs]


class MultiStepLR(LRScheduler):
    """Multiply the rate by ``gamma`` at each epoch in ``milestones`` (a repeated
    milestone multiplies once per repetition)."""

    def __init__(self, optimizer, milestones, gamma=0.1, last_epoch=-1):
        self.milestones = sorted(check_int("MultiStepLR", f"milestones[{i}]", m)
                                 for i, m in enumerate(milestones))
        self.gamma = check_number("MultiStepLR", "gamma", gamma)
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        hits = self.milestones.count(self.last_epoch)
        if not hits:
            return self._current()
        return [lr * self.gamma ** hits for lr in self._current()]

    def _closed_form_lr(self):
        passed = bisect_right(self.milestones, self.last_epoch)
        return [base * self.gamma ** passed for base in self.base_lrs]


class ExponentialLR(LRScheduler):
    """Multiply the rate by ``gamma`` every epoch."""

    def __init__(self, optimizer, gamma, last_epoch=-1):
        self.gamma = check_number("ExponentialLR", "gamma", gamma)
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self._is_initial:
            return self._current()
        return [lr * self.gamma for lr in self._current()]

    def _closed_form_lr(self):
        return [base * self.gamma ** self.last_epoch for base in self.base_lrs]


class LinearLR(LRScheduler):
    """Scale the rate linearly from ``start_factor`` to ``end_factor`` over ``total_iters``
    epochs (a warm-up), then keep it."""

    def __init__(self, optimizer, start_factor=1.0 / 3, end_factor=1.0, total_iters=5,
                 last_epoch=-1):
        self.start_factor = check_number("LinearLR", "start_factor", start_factor, 0, 1,
                                         low_open=True)
        self.end_factor = check_number("LinearLR", "end_factor", end_factor, 0, 1)
        self.total_iters = check_int("LinearLR", "total_iters", total_iters, low=0)
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        e, s, f, n = self.last_epoch, self.start_factor, self.end_factor, self.total_iters
        if e == 0:
            return [lr * s for lr in self._current()]
        if self._is_initial or e > n:
            return self._current()
        # ratio of the factor at epoch e to the factor at epoch e - 1
        ratio = 1.0 + (f - s) / (n * s + (e - 1) * (f - s))
        return [lr * ratio for lr in self._current()]

    def _closed_form_lr(self):
        s, f, n = self.start_factor, self.end_factor, self.total_iters
        return [base * (s + (f - s) * min(n, self.last_epoch) / n) for base in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """``lr = eta_min + (initial_lr - eta_min) (1 + cos(pi epoch / T_max)) / 2``, continued
    past ``T_max`` as a cosine wave (computed recursively, as PyTorch does)."""

    def __init__(self, optimizer, T_max, eta_min=0.0, last_epoch=-1):
        if check_number("CosineAnnealingLR", "T_max", T_max) <= 0:
            raise ValueError(f"CosineAnnealingLR: T_max must be positive, got {T_max!r}")
        self.T_max = T_max
        self.eta_min = check_number("CosineAnnealingLR", "eta_min", eta_min)
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        e, T, lo = self.last_epoch, self.T_max, self.eta_min
        if self._is_initial:
            return self._current()
        if (e - 1 - T) % (2 * T) == 0:           # the trough: the recursion would divide by 0
            return [lr + (base - lo) * (1 - math.cos(math.pi / T)) / 2
                    for lr, base in zip(self._current(), self.base_lrs)]
        ratio = (1 + math.cos(math.pi * e / T)) / (1 + math.cos(math.pi * (e - 1) / T))
        return [ratio * (lr - lo) + lo for lr in self._current()]

    def _closed_form_lr(self):
        lo, cos = self.eta_min, math.cos(math.pi * self.last_epoch / self.T_max)
        return [lo + (base - lo) * (1 + cos) / 2 for base in self.base_lrs]


class SequentialLR(LRScheduler):
    """Run ``schedulers[0]`` until ``milestones[0]``, then ``schedulers[1]`` (restarted at
    its epoch 0), and so on.  Typical use: LinearLR warm-up, then CosineAnnealingLR."""

    def __init__(self, optimizer, schedulers, milestones, last_epoch=-1):
        _check_optimizer(type(self), optimizer)
        if not schedulers:
            raise ValueError("SequentialLR: expects at least one scheduler, got none")
        for i, s in enumerate(schedulers):
            if not isinstance(s, LRScheduler):
                raise TypeError(f"SequentialLR: schedulers[{i}] must be an LRScheduler, got "
                                f"{type(s).__name__}")
            if isinstance(s, ReduceLROnPlateau):
                raise ValueError(f"SequentialLR: schedulers[{i}] is a ReduceLROnPlateau, which "
                                 "needs a metric in step() and cannot be sequenced")
            if s.optimizer is not optimizer:
                raise ValueError(f"SequentialLR: schedulers[{i}] ({type(s).__name__}) drives "
                                 "a different optimizer")
        if len(milestones) != len(schedulers) - 1:
            raise ValueError(f"SequentialLR: {len(schedulers)} schedulers need "
                             f"{len(schedulers) - 1} milestones, got {len(milestones)}")
        milestones = [check_int("SequentialLR", f"milestones[{i}]", m)
                      for i, m in enumerate(milestones)]
        if milestones != sorted(milestones):
            raise ValueError(f"SequentialLR: milestones must be in increasing order, got "
                             f"{milestones}")
        self.optimizer = optimizer
        self._schedulers = list(schedulers)
        self._milestones = list(milestones)
        self.last_epoch = last_epoch + 1
        # Building each scheduler already stepped it once: undo that, then start the first.
        for group in optimizer.param_groups:
            group["lr"] = group["initial_lr"]
        for s in self._schedulers:
            _rewind(s)
        first = self._schedulers[bisect_right(self._milestones, 0)]
        first._initial_step()
        self._last_lr = first.get_last_lr()

    def step(self):
        self.last_epoch += 1
        i = bisect_right(self._milestones, self.last_epoch)
        scheduler = self._schedulers[i]
        if i > 0 and self._milestones[i - 1] == self.last_epoch:
            scheduler._apply(0)        # a new phase starts at its own epoch 0
        else:
            scheduler.step()
        self._last_lr = scheduler.get_last_lr()

    def state_dict(self):
        state = super().state_dict()
        state["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return state

    def load_state_dict(self, state_dict):
        state = check_scheduler_state(self, state_dict, skip=("_schedulers",))
        inner = state_dict.get("_schedulers", [])
        if not isinstance(inner, (list, tuple)) or len(inner) != len(self._schedulers):
            raise ValueError(f"SequentialLR.load_state_dict: _schedulers must hold "
                             f"{len(self._schedulers)} state dicts, got {describe(inner)}")
        if len(state.get("_milestones", self._milestones)) != len(self._milestones):
            raise ValueError(f"SequentialLR.load_state_dict: _milestones must hold "
                             f"{len(self._milestones)} epochs, got {state['_milestones']}")
        for s, sd in zip(self._schedulers, inner):     # all checked before any is set
            check_scheduler_state(s, sd, skip=("lr_lambdas", "_schedulers"))
        self.__dict__.update(state)
        for s, sd in zip(self._schedulers, inner):
            s.load_state_dict(sd)


def _rewind(scheduler):
    """Step a scheduler (and any it wraps) back one epoch."""
    inner = getattr(scheduler, "_schedulers", None)
    if inner is not None:
        for s in inner:
            _rewind(s)
    else:
        scheduler.last_epoch -= 1


def _total_steps(total_steps, epochs, steps_per_epoch):
    """OneCycleLR's step count: ``total_steps``, or ``epochs * steps_per_epoch``."""
    if total_steps is not None:
        return check_int("OneCycleLR", "total_steps", total_steps, low=1)
    if epochs is not None and steps_per_epoch is not None:
        return (check_int("OneCycleLR", "epochs", epochs, low=1)
                * check_int("OneCycleLR", "steps_per_epoch", steps_per_epoch, low=1))
    raise ValueError("OneCycleLR: give total_steps, or epochs and steps_per_epoch")


def _one_cycle_phases(n, pct_start, three_phase):
    """Each phase runs up to its end_step, moving lr (and momentum) between two group keys."""
    warm_up = dict(end_step=float(pct_start * n) - 1, start_lr="initial_lr", end_lr="max_lr",
                   start_momentum="max_momentum", end_momentum="base_momentum")
    if three_phase:
        return [warm_up,
                dict(end_step=float(2 * pct_start * n) - 2, start_lr="max_lr",
                     end_lr="initial_lr", start_momentum="base_momentum",
                     end_momentum="max_momentum"),
                dict(end_step=n - 1, start_lr="initial_lr", end_lr="min_lr",
                     start_momentum="max_momentum", end_momentum="max_momentum")]
    return [warm_up, dict(end_step=n - 1, start_lr="max_lr", end_lr="min_lr",
                          start_momentum="base_momentum", end_momentum="max_momentum")]


class OneCycleLR(LRScheduler):
    """The 1cycle policy (Smith & Topin): warm up from ``max_lr / div_factor`` to ``max_lr``
    over ``pct_start`` of ``total_steps``, then anneal to ``initial_lr / final_div_factor``;
    momentum (or Adam's beta1) moves the opposite way.  Step once per batch.
    """

    def __init__(self, optimizer, max_lr, total_steps=None, epochs=None, steps_per_epoch=None,
                 pct_start=0.3, anneal_strategy="cos", cycle_momentum=True,
                 base_momentum=0.85, max_momentum=0.95, div_factor=25.0,
                 final_div_factor=1e4, three_phase=False, last_epoch=-1):
        _check_optimizer(type(self), optimizer)
        self.total_steps = _total_steps(total_steps, epochs, steps_per_epoch)
        for name, value in (("pct_start", pct_start), ("div_factor", div_factor),
                            ("final_div_factor", final_div_factor)):
            check_number("OneCycleLR", name, value)
        check_int("OneCycleLR", "last_epoch", last_epoch)
        check_bool("OneCycleLR", "three_phase", three_phase)
        check_bool("OneCycleLR", "cycle_momentum", cycle_momentum)
        if not isinstance(pct_start, float) or not 0 <= pct_start <= 1:
            raise ValueError(f"OneCycleLR: pct_start must be a float in [0, 1], "
                             f"got {pct_start!r}")
        check_choice("OneCycleLR", "anneal_strategy", anneal_strategy, ("cos", "linear"))
        self.anneal_strategy = anneal_strategy
        self._phases = _one_cycle_phases(self.total_steps, pct_start, three_phase)
        groups = optimizer.param_groups
        if last_epoch == -1:
            tops = _per_group("OneCycleLR max_lr", optimizer, max_lr, "max_lr")
            for group, top in zip(groups, tops):
                group["initial_lr"] = top / div_factor
                group["max_lr"] = top
                group["min_lr"] = group["initial_lr"] / final_div_factor
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            defaults = optimizer.defaults
            if "momentum" not in defaults and "betas" not in defaults:
                raise ValueError(f"OneCycleLR: cycle_momentum=True needs an optimizer with "
                                 f"momentum or betas, {type(optimizer).__name__} has neither")
            self.use_beta1 = "betas" in defaults
            tops = _per_group("OneCycleLR max_momentum", optimizer, max_momentum,
                              "max_momentum")
            bases = _per_group("OneCycleLR base_momentum", optimizer, base_momentum,
                               "base_momentum")
            if last_epoch == -1:
                for group, top, base in zip(groups, tops, bases):
                    group["max_momentum"] = top
                    group["base_momentum"] = base
        super().__init__(optimizer, last_epoch)

    def _set_momentum(self, group, value):
        if self.use_beta1:
            group["betas"] = (value, *group["betas"][1:])
        else:
            group["momentum"] = value

    def _anneal(self, start, end, pct):
        if self.anneal_strategy == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def get_lr(self):
        t = self.last_epoch
        if t > self.total_steps:
            raise ValueError(f"OneCycleLR: stepped {t} times, but total_steps is "
                             f"{self.total_steps}")
        lrs = []
        for group in self.optimizer.param_groups:
            start = 0.0
            for i, phase in enumerate(self._phases):
                end = phase["end_step"]
                if t <= end or i == len(self._phases) - 1:
                    pct = (t - start) / (end - start)
                    lrs.append(self._anneal(group[phase["start_lr"]], group[phase["end_lr"]], pct))
                    if self.cycle_momentum:
                        self._set_momentum(group, self._anneal(group[phase["start_momentum"]],
                                                               group[phase["end_momentum"]], pct))
                    break
                start = end
        return lrs


class ReduceLROnPlateau(LRScheduler):
    """Multiply the rate by ``factor`` when a metric has not improved for ``patience``
    epochs: ``scheduler.step(val_loss)``.

    ``ReduceLROnPlateau(optimizer, mode='min', factor=0.1, patience=10, threshold=1e-4,
    threshold_mode='rel', cooldown=0, min_lr=0, eps=1e-8)``.
    """

    def __init__(self, optimizer, mode="min", factor=0.1, patience=10, threshold=1e-4,
                 threshold_mode="rel", cooldown=0, min_lr=0, eps=1e-8):
        _check_optimizer(type(self), optimizer)
        where = "ReduceLROnPlateau"
        self.factor = check_number(where, "factor", factor)
        if self.factor >= 1.0:
            raise ValueError(f"{where}: factor must be < 1.0, got {self.factor}")
        self.optimizer = optimizer
        self.mode = check_choice(where, "mode", mode, ("min", "max"))
        self.threshold_mode = check_choice(where, "threshold_mode", threshold_mode, ("rel", "abs"))
        self.min_lrs = _per_group(f"{where} min_lr", optimizer, min_lr, "min_lr")
        self.default_min_lr = None if isinstance(min_lr, (list, tuple)) else self.min_lrs[0]
        self.patience = check_int(where, "patience", patience, low=0)
        self.cooldown = check_int(where, "cooldown", cooldown, low=0)
        self.threshold = check_number(where, "threshold", threshold, low=0)
        self.eps = check_number(where, "eps", eps, low=0)
        self.last_epoch = 0
        self._last_lr = self._current()
        self.best = math.inf if mode == "min" else -math.inf
        self.cooldown_counter = 0
        self.num_bad_epochs = 0

    @property
    def in_cooldown(self):
        return self.cooldown_counter > 0

    def _is_better(self, value):
        if self.mode == "min":
            bar = self.best * (1 - self.threshold) if self.threshold_mode == "rel" \
                else self.best - self.threshold
            return value < bar
        bar = self.best * (1 + self.threshold) if self.threshold_mode == "rel" \
            else self.best + self.threshold
        return value > bar

    def step(self, metrics, epoch=None):
        """Record this epoch's metric; reduce the rates after ``patience`` bad epochs."""
        value = float(metrics)
        self.last_epoch = self.last_epoch + 1 if epoch is None else epoch
        if self._is_better(value):
            self.best = value
            self.num_bad_epochs = 0
        else:
            self.num_bad_epochs += 1
        if self.in_cooldown:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0        # bad epochs during cooldown do not count
        if self.num_bad_epochs > self.patience:
            self._reduce()
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0
        self._last_lr = self._current()

    def _reduce(self):
        groups = self.optimizer.param_groups
        if len(self.min_lrs) != len(groups):
            if self.default_min_lr is None:
                raise RuntimeError(f"ReduceLROnPlateau: the optimizer now has {len(groups)} "
                                   f"param groups but min_lr lists {len(self.min_lrs)}")
            self.min_lrs = [self.default_min_lr] * len(groups)
        for group, floor in zip(groups, self.min_lrs):
            old = float(group["lr"])
            new = max(old * self.factor, floor)
            if old - new > self.eps:     # ignore changes too small to matter
                group["lr"] = new
