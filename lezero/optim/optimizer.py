"""``Optimizer``: the base every optimizer shares (parameter groups, state, state_dict).

An optimizer holds ``param_groups``, a list of dicts.  Each group has a ``'params'`` list and
its own copy of every hyperparameter (``'lr'``, ``'betas'``, ...), so a scheduler or a user can
change one group's learning rate by editing the dict.  Per-parameter buffers live in
``state``, a dict keyed by the Parameter itself (Variables hash by identity).

Updates work on ``p.data`` in place, on NumPy or CuPy (``xp = cuda.get_array_module``),
in the parameter's dtype, and skip parameters whose ``grad`` is None, as PyTorch does.
A subclass writes ``_update(p, g, state, group)`` for one parameter; the base class walks
the groups and hands it the gradient array.
"""
import inspect

from lezero import cuda
from lezero.kernels import axpy
from lezero.core import Variable, enable_grad
from lezero.optim.state_checks import check_state_dict
from lezero.utils.checks import check_bool, check_number, check_type

# Pass as a default (``defaults={"lr": required}``) for an option every group must set.
required = object()


class Optimizer:
    """Base class: ``Optimizer(params, defaults)``.

    ``params`` is an iterable of Parameters/Variables, of ``(name, Parameter)`` pairs, or of
    dicts (param groups) each with a ``'params'`` entry and optional per-group options;
    ``defaults`` fills in the options a group leaves out.
    """

    # The state each update rule reads, checked by load_state_dict: key -> a kind from
    # ``state_checks`` (PARAM: an array of the parameter's shape; COUNT: ``step`` ...), and
    # the keys a non-empty loaded state must have.
    state_spec = {}
    required_state = ()

    def __init__(self, params, defaults):
        self.defaults = dict(defaults)
        self.state = {}
        self.param_groups = []
        if isinstance(params, (Variable, dict)) or isinstance(params, cuda.array_types()):
            raise TypeError(f"{type(self).__name__}: params must be an iterable of Parameters "
                            f"or of param-group dicts, got a single {type(params).__name__}")
        self._refuse_set(params)
        groups = list(params)
        if not groups:
            raise ValueError(f"{type(self).__name__}: got an empty parameter list (a model of "
                             f"lazy layers has no parameters until its first forward call: "
                             f"run one batch through it before building the optimizer)")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(group)

    # ----- parameter groups --------------------------------------------------------
    def add_param_group(self, param_group):
        """Append a group: ``{'params': [...], 'lr': ...}``; missing options take the defaults."""
        name = type(self).__name__
        if not isinstance(param_group, dict):
            raise TypeError(f"{name}.add_param_group: expected a dict, "
                            f"got {type(param_group).__name__}")
        group = dict(param_group)
        if "params" not in group:
            raise ValueError(f"{name}.add_param_group: the group has no 'params' entry")
        params = group["params"]
        if isinstance(params, Variable):
            params = [params]
        self._refuse_set(params)
        params = list(params)
        if params and all(isinstance(p, tuple) and len(p) == 2 for p in params):
            group["param_names"] = [n for n, _ in params]
            params = [p for _, p in params]
        for i, p in enumerate(params):
            if not isinstance(p, Variable):
                raise TypeError(f"{name}: params[{i}] must be a Parameter or Variable, "
                                f"got {type(p).__name__}")
            if p.creator is not None:
                raise ValueError(f"{name}: params[{i}] is not a leaf (it was computed by "
                                 f"{type(p.creator).__name__}); only leaves can be optimized")
        ids = [id(p) for p in params]
        if len(set(ids)) != len(ids):
            raise ValueError(f"{name}: a parameter group lists the same parameter twice")
        taken = {id(p) for g in self.param_groups for p in g["params"]}
        if taken.intersection(ids):
            raise ValueError(f"{name}: some parameters appear in more than one parameter group")
        group["params"] = params
        for key, default in self.defaults.items():
            if default is required and key not in group:
                raise ValueError(f"{name}: parameter group {len(self.param_groups)} does not "
                                 f"set the required option {key!r}")
            group.setdefault(key, default)
        self._check_kinds(group)
        self._check_group(group, len(self.param_groups))
        self.param_groups.append(group)
        self._init_group_state(group)

    def _refuse_set(self, params):
        if isinstance(params, (set, frozenset)):
            raise TypeError(f"{type(self).__name__}: params must be an ordered collection "
                            "(a list), not a set: a set's order changes between runs and "
                            "state_dict numbers parameters by position")

    def _check_kinds(self, group):
        """TypeError unless every option has the kind of the constructor's default for it:
        a number where that is a number, a bool for a bool, a pair of numbers for a pair."""
        name = type(self).__name__
        signature = inspect.signature(type(self)).parameters
        for key in self.defaults:
            default = signature[key].default if key in signature else None
            value = group[key]
            if isinstance(default, bool):
                check_bool(name, key, value)
            elif isinstance(default, (int, float)):
                check_number(name, key, value)
            elif isinstance(default, tuple) and all(isinstance(d, (int, float)) for d in default):
                check_type(name, key, value, (tuple, list), "a pair of numbers")
                for k, v in enumerate(value):
                    check_number(name, f"{key}[{k}]", v)

    def _check_group(self, group, index):
        """Raise ValueError for bad hyperparameters (subclasses add checks)."""
        self._require_nonnegative(group, index, "lr")

    def _init_group_state(self, group):
        """Create state eagerly (only Adagrad does, as in PyTorch)."""

    def _require_nonnegative(self, group, index, *keys):
        for key in keys:
            self._require(group, index, key, group[key] >= 0, ">= 0")

    def _require(self, group, index, key, ok, rule):
        if not ok:
            raise ValueError(f"{type(self).__name__}: invalid {key}={group[key]!r} in param "
                             f"group {index} (must be {rule})")

    def _check_betas(self, group, index, key="betas"):
        betas = group[key]
        if len(betas) != 2:
            raise ValueError(f"{type(self).__name__}: {key} must be a pair, got {betas!r}")
        for k, b in enumerate(betas):
            if not 0.0 <= b < 1.0:
                raise ValueError(f"{type(self).__name__}: invalid {key}[{k}]={b!r} in param "
                                 f"group {index} (must be in [0, 1))")

    # ----- the update ------------------------------------------------------------------
    def zero_grad(self, set_to_none=True):
        """Forget gradients (``set_to_none``) or zero them in place."""
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                    continue
                g = p.grad.data
                if p.grad.creator is None and getattr(g.flags, "writeable", True):
                    g.fill(0)
                else:    # a graph-carrying or read-only gradient is replaced, not written
                    p.grad = Variable(cuda.get_array_module(g).zeros_like(g),
                                      requires_grad=False)

    def step(self, closure=None):
        """Update every parameter that has a gradient; ``closure`` re-evaluates the loss
        (with gradients enabled) and its value is returned."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        for group in self.param_groups:
            hyper = self._hyper(group)
            for p in group["params"]:
                if p.grad is None:
                    continue
                param, grad = p.data, p.grad.data
                if grad.shape != param.shape:
                    raise ValueError(f"{type(self).__name__}.step: a parameter of shape "
                                     f"{param.shape} has a gradient of shape {grad.shape}")
                if grad.dtype != param.dtype:     # e.g. float16 gradients of float32 weights
                    grad = grad.astype(param.dtype)
                state = self.state.get(p)
                if state is None:
                    state = self.state[p] = {}
                self._update(param, grad, state, hyper)
        return loss

    def _hyper(self, group):
        """The group's options as plain Python numbers, read once per step.

        NumPy scalars would promote float32 parameters to float64 (NEP 50), so every
        float option passes through ``float()``.
        """
        return {k: _plain(v) for k, v in group.items() if k != "params"}

    def _update(self, param, grad, state, hyper):
        """Update one parameter array in place from its gradient array."""
        raise NotImplementedError

    # ----- checkpoints -----------------------------------------------------------------
    def state_dict(self):
        """``{'state': {index: {...}}, 'param_groups': [{..., 'params': [indices]}]}``.

        Parameters are numbered 0, 1, ... across the groups in order, as in PyTorch.  The
        state arrays are the live buffers (not copies): save them before stepping again.
        """
        index = {}
        groups = []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            packed["params"] = []
            for p in group["params"]:
                index.setdefault(id(p), len(index))
                packed["params"].append(index[id(p)])
            groups.append(packed)
        state = {index[id(p)]: dict(s) for p, s in self.state.items() if id(p) in index}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict):
        """Restore a ``state_dict`` (from LeZero or PyTorch) into this optimizer.

        Groups are matched by position and must list as many parameters as ours.  Every
        entry is checked first (``state_checks``): the state a rule reads must have the
        parameter's shape (counters: numbers), options pass the constructor's checks.  State
        arrays are copied onto each parameter's device; floating ones take its dtype.
        """
        state, groups = check_state_dict(self, state_dict)
        self._check_loaded(state, groups)
        self.state = state
        self.param_groups = groups

    def _check_loaded(self, state, groups):
        """Checks across a loaded state's entries (LBFGS's history); raise to refuse."""

    def __repr__(self):
        lines = [f"{type(self).__name__} ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            for key in sorted(group):
                if key not in ("params", "param_names"):
                    lines.append(f"    {key}: {group[key]}")
        lines.append(")")
        return "\n".join(lines)


def _plain(value):
    """A float option as a Python float (bools, ints, None, strings and tuples kept)."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, (tuple, list)):
        return tuple(_plain(v) for v in value)
    if isinstance(value, (int, float)):
        return float(value) if isinstance(value, float) else value
    try:
        return float(value)      # NumPy scalars, 0-d arrays, one-element Variables
    except (TypeError, ValueError):
        return value


# ----- helpers the update rules share ----------------------------------------------------
def init_state(state, param, *buffers, **values):
    """Fill a new parameter's state: ``values`` first (``step=0``), then a zeroed buffer of
    the parameter's shape and dtype for each name in ``buffers``; an existing state is left
    as it is."""
    if not state:
        state.update(values)
        xp = cuda.get_array_module(param)
        for name in buffers:
            state[name] = xp.zeros_like(param)


def effective_grad(grad, param, weight_decay, maximize):
    """The gradient an update rule sees: negated to maximize, plus ``weight_decay * param``
    (L2 regularisation, "coupled" weight decay).

    Returns ``(g, owned)``.  ``owned`` is True when ``g`` is a fresh array the caller may
    overwrite; otherwise ``g`` is the parameter's own ``.grad`` memory, which an optimizer
    must never write (PyTorch leaves ``p.grad`` untouched too).
    """
    # out= keeps 0-d parameters as arrays (NumPy turns 0-d results into scalars otherwise)
    xp = cuda.get_array_module(param)
    if weight_decay:
        g = xp.multiply(param, weight_decay, out=xp.empty_like(param))
        if maximize:
            g -= grad
        else:
            g += grad
        return g, True
    if maximize:
        return xp.negative(grad, out=xp.empty_like(grad)), True
    return grad, False


def add_scaled(param, x, alpha, owned):
    """``param += alpha * x`` in place: one fused pass where the kernel takes the arrays
    (``kernels.axpy``), else reusing ``x``'s memory when the caller owns it."""
    if axpy.fits(param, x):
        axpy.axpby_numba(param, 1.0, x, alpha)
    elif owned:
        x *= alpha
        param += x
    else:
        param += alpha * x


def lerp_(avg, x, weight, scratch):
    """``avg += weight * (x - avg)`` in place (``torch.lerp_``): an exponential moving
    average; ``scratch`` is a temporary of ``avg``'s shape and dtype."""
    xp = cuda.get_array_module(avg)
    xp.subtract(x, avg, out=scratch)
    scratch *= weight
    avg += scratch


def square_avg_(avg, x, decay, scratch):
    """``avg = decay * avg + (1 - decay) * x * x`` in place (the squared-gradient average
    of Adam, RMSprop, Adadelta); ``scratch`` is a temporary of ``avg``'s shape and dtype."""
    cuda.get_array_module(avg).multiply(x, x, out=scratch)
    scratch *= 1.0 - decay
    avg *= decay
    avg += scratch
