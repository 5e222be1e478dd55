"""The checks behind ``LRScheduler.load_state_dict``: a scheduler's state dict is read from
a file, and loading it used to set any attribute it named (``optimizer`` included) to any
value.

``check_scheduler_state(scheduler, state_dict)`` accepts only the attributes the scheduler
itself has (its own ``state_dict()``), each of the kind it has now: a bool for a bool, an
int for a counter (``last_epoch``), a real number for a rate, a list of one number per
param group for ``base_lrs`` / ``_last_lr`` / ``min_lrs``, a known word for ``mode`` and
the other choices, dicts with the same keys for OneCycleLR's phases.  Missing attributes
keep their values.  Errors: ``TypeError`` for a wrong kind, ``ValueError`` otherwise, each
starting ``<Scheduler>.load_state_dict:`` and naming the entry.
"""
import numbers

import numpy as np

from lezero.utils.checks import describe

__all__ = ["check_scheduler_state"]

# One entry per param group.
_PER_GROUP = {"base_lrs", "_last_lr", "min_lrs"}
# Counters and epochs: ints (every other number may be any real number).
_INTS = {"last_epoch", "_step_count", "step_size", "total_iters", "total_steps", "patience",
         "cooldown", "cooldown_counter", "num_bad_epochs", "milestones", "_milestones"}
# Numbers that may also be None.
_OPTIONAL = {"default_min_lr"}
# Ranges the constructors enforce and the schedules divide by: (low, open at low?).
_RANGES = {"T_max": (0, True), "step_size": (1, False), "total_steps": (1, False),
           "start_factor": (0, True), "total_iters": (0, False), "patience": (0, False),
           "cooldown": (0, False), "cooldown_counter": (0, False),
           "num_bad_epochs": (0, False), "threshold": (0, False), "eps": (0, False)}
# Words that select a branch: only these values.
_CHOICES = {"mode": ("min", "max"), "threshold_mode": ("rel", "abs"),
            "anneal_strategy": ("cos", "linear")}
# OneCycleLR's phases name param-group keys.
_GROUP_KEYS = ("initial_lr", "max_lr", "min_lr", "max_momentum", "base_momentum")


def check_scheduler_state(scheduler, state_dict, skip=()):
    """The entries of ``state_dict`` checked against ``scheduler``'s current ones, as a new
    dict (``skip``: keys the caller checks itself)."""
    where = f"{type(scheduler).__name__}.load_state_dict"
    if not isinstance(state_dict, dict):
        raise TypeError(f"{where}: expected a dict, got {type(state_dict).__name__}")
    current = scheduler.state_dict()
    groups = len(scheduler.optimizer.param_groups)
    checked = {}
    for key, value in state_dict.items():
        if key in skip:
            continue
        if key not in current:
            raise ValueError(f"{where}: unknown entry {key!r} (a {type(scheduler).__name__} "
                             f"has {sorted(k for k in current if k not in skip)})")
        if key in _PER_GROUP and value is not None:
            _length(where, key, value, groups)
        checked[key] = _like(where, key, value, current[key], key)
        _in_range(where, key, checked[key])
    if "_phases" in checked:
        _phases_advance(where, checked["_phases"])
    return checked


def _in_range(where, key, value):
    if key in _RANGES and value is not None:
        low, open_low = _RANGES[key]
        if value < low or (open_low and value == low):
            raise ValueError(f"{where}: {key} must be {'>' if open_low else '>='} {low}, got "
                             f"{value!r}")


def _phases_advance(where, phases):
    """OneCycleLR divides by each phase's length: no phase may end where it starts."""
    start = 0
    for i, phase in enumerate(phases):
        if phase["end_step"] == start:
            raise ValueError(f"{where}: _phases[{i}] ends where it starts (end_step "
                             f"{start!r})")
        start = phase["end_step"]


def _length(where, key, value, n):
    if not isinstance(value, (list, tuple)) or len(value) != n:
        got = len(value) if isinstance(value, (list, tuple)) else describe(value)
        raise ValueError(f"{where}: {key} must hold one value per param group ({n}), got {got}")


def _like(where, key, value, current, name):
    """``value`` checked to have ``current``'s kind (recursively for lists and dicts);
    ``key`` names it in messages, ``name`` is the attribute or field it belongs to."""
    if isinstance(current, bool):
        if not isinstance(value, (bool, np.bool_)):
            raise TypeError(f"{where}: {key} must be a bool, got {describe(value)}")
        return bool(value)
    if current is None or isinstance(current, numbers.Real):
        return _number(where, key, value, name in _INTS,
                       current is None or name in _OPTIONAL)
    if isinstance(current, str):
        return _word(where, key, value, name)
    if isinstance(current, (list, tuple)):
        if not isinstance(value, (list, tuple)):
            raise TypeError(f"{where}: {key} must be a list, got {describe(value)}")
        if current and isinstance(current[0], dict) and len(value) != len(current):
            raise ValueError(f"{where}: {key} must have {len(current)} entries, got "
                             f"{len(value)}")
        return [_like(where, f"{key}[{i}]", v, current[min(i, len(current) - 1)]
                      if current else 0.0, name) for i, v in enumerate(value)]
    if isinstance(current, dict):
        if not isinstance(value, dict) or set(value) != set(current):
            raise ValueError(f"{where}: {key} must be a dict with keys {sorted(current)}, got "
                             f"{sorted(value) if isinstance(value, dict) else describe(value)}")
        return {k: _like(where, f"{key}[{k!r}]", v, current[k], k) for k, v in value.items()}
    raise TypeError(f"{where}: {key} cannot be loaded (it holds a {type(current).__name__})")


def _number(where, key, value, integer, optional):
    """A real number (an int where ``integer``); None too where ``optional``."""
    if value is None and optional:
        return None
    if isinstance(value, (np.ndarray, np.generic)) and value.size == 1:
        value = value.item()       # a 0-d array from a file
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        kind = "an int" if integer else "a real number"
        raise TypeError(f"{where}: {key} must be {kind}, got {describe(value)}")
    if integer:
        if not float(value).is_integer():
            raise ValueError(f"{where}: {key} must be an int, got {value!r}")
        return int(value)
    return value


def _word(where, key, value, name):
    if not isinstance(value, str):
        raise TypeError(f"{where}: {key} must be a str, got {describe(value)}")
    allowed = _CHOICES.get(name) or (_GROUP_KEYS if name.endswith(("_lr", "_momentum"))
                                     else None)
    if allowed is not None and value not in allowed:
        raise ValueError(f"{where}: {key} must be one of {allowed}, got {value!r}")
    return value
