"""``GradScaler``: loss scaling for float16 training, with torch.amp.GradScaler's rules.

Small float16 gradients flush to zero.  Multiplying the loss by a large scale S moves every
gradient up by S; before the optimizer step the gradients are divided by S again.  If any
gradient became inf or NaN the step is skipped and S halves; after ``growth_interval``
clean steps in a row S doubles.  The sequence of scales is exactly torch's (the scale is
kept in float32, as torch keeps it).

    scaler.scale(loss).backward()
    scaler.unscale_(opt)                      # optional: clip the true gradients here
    optim.clip_grad_norm_(model.parameters(), 1.0)
    result = scaler.step(opt, scheduler=sched)   # the scheduler steps only if opt did
    scaler.update()
    result.stepped, result.nonfinite, result.scale_before, result.scale_after
"""
import dataclasses

import numpy as np

from lezero import cuda
from lezero.amp.cast import cast
from lezero.amp.dtypes import is_low
from lezero.core import Variable
from lezero.utils.checks import check_bool, check_int, check_number, describe

__all__ = ["GradScaler", "StepResult"]

_READY, _UNSCALED, _STEPPED = "ready", "unscaled", "stepped"


@dataclasses.dataclass
class StepResult:
    """What ``GradScaler.step`` did: ``stepped`` (False when skipped for inf/NaN),
    ``nonfinite`` (names of the parameters whose gradient held inf/NaN), ``scale_before``
    and ``scale_after`` (after the ``update()`` that follows; until then, the scale that
    update() will set)."""
    stepped: bool
    nonfinite: tuple
    scale_before: float
    _scaler: object = dataclasses.field(repr=False, compare=False, default=None)
    _after: float = dataclasses.field(repr=False, compare=False, default=None)

    @property
    def found_inf(self):
        return bool(self.nonfinite)

    @property
    def scale_after(self):
        if self._after is not None or self._scaler is None:
            return self._after if self._after is not None else self.scale_before
        return self._scaler._next_scale()

    def __repr__(self):
        return (f"StepResult(stepped={self.stepped}, nonfinite={list(self.nonfinite)}, "
                f"scale_before={self.scale_before}, scale_after={self.scale_after})")


def _param_name(group, index, p):
    names = group.get("param_names")
    if names:
        return names[index]
    return p.name or f"param {index} {tuple(p.shape)}"


class GradScaler:
    """Scale the loss, unscale the gradients, skip steps with inf/NaN, adapt the scale."""

    def __init__(self, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        where = "GradScaler"
        init_scale = check_number(where, "init_scale", init_scale, low=0, low_open=True)
        self._growth_factor = check_number(where, "growth_factor", growth_factor, low=1.0,
                                           low_open=True)
        self._backoff_factor = check_number(where, "backoff_factor", backoff_factor, low=0,
                                            high=1.0, low_open=True, high_open=True)
        self._growth_interval = check_int(where, "growth_interval", growth_interval, low=1)
        self._enabled = check_bool(where, "enabled", enabled)
        self._scale = np.float32(init_scale)
        self._growth_tracker = 0
        self._states = {}           # id(optimizer) -> {"stage", "nonfinite"}
        self._scaled = False        # scale() was called since the last update()
        self._results = []

    # ----- the loop ----------------------------------------------------------------
    def scale(self, outputs):
        """``outputs * scale`` (a Variable, or a list/tuple of them).  A float16 or
        bfloat16 loss is cast to float32 first, so the product cannot overflow."""
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        if not isinstance(outputs, Variable):
            raise TypeError(f"GradScaler.scale: outputs must be a Variable (the loss) or a "
                            f"list/tuple of them, got {describe(outputs)}")
        if not self._enabled:
            return outputs
        self._scaled = True
        if is_low(outputs.dtype):
            outputs = cast(outputs, np.float32)
        return outputs * outputs.dtype.type(self._scale)

    def unscale_(self, optimizer):
        """Divide the optimizer's gradients by the scale, in place, and note inf/NaN.
        Once per step (before ``step``); clip gradients after it."""
        if not self._enabled:
            return
        self._require_scale("unscale_")
        state = self._state(optimizer)
        if state["stage"] == _UNSCALED:
            raise RuntimeError("GradScaler.unscale_: already called on this optimizer since "
                               "the last update(); call it once per step")
        if state["stage"] == _STEPPED:
            raise RuntimeError("GradScaler.unscale_: called after step(); unscale_ comes "
                               "before step, and update() starts the next iteration")
        inv = np.float32(1.0 / np.float64(self._scale))     # torch: double reciprocal
        bad = []
        for group in optimizer.param_groups:
            for i, p in enumerate(group["params"]):
                if p.grad is None:
                    continue
                g = p.grad.data
                if g.dtype == np.float16:
                    raise ValueError(f"GradScaler.unscale_: {_param_name(group, i, p)} has a "
                                     "float16 gradient; keep parameters in float32 (autocast "
                                     "casts them per operator)")
                xp = cuda.get_array_module(g)
                if not bool(xp.isfinite(g).all()):
                    bad.append(_param_name(group, i, p))
                g *= g.dtype.type(inv)
        state["nonfinite"] = tuple(bad)
        state["stage"] = _UNSCALED

    def step(self, optimizer, scheduler=None):
        """``optimizer.step()`` unless a gradient held inf/NaN; returns a ``StepResult``.
        ``scheduler`` (optional) is stepped only when the optimizer stepped."""
        if not self._enabled:
            optimizer.step()
            if scheduler is not None:
                scheduler.step()
            return StepResult(True, (), 1.0, None, 1.0)
        self._require_scale("step")
        state = self._state(optimizer)
        if state["stage"] == _STEPPED:
            raise RuntimeError("GradScaler.step: already called for this optimizer since the "
                               "last update()")
        if state["stage"] == _READY:
            self.unscale_(optimizer)
        stepped = not state["nonfinite"]
        if stepped:
            optimizer.step()
            if scheduler is not None:
                scheduler.step()
        state["stage"] = _STEPPED
        result = StepResult(stepped, state["nonfinite"], float(self._scale), self)
        self._results.append(result)
        return result

    def update(self, new_scale=None):
        """Set the scale for the next iteration: backoff after an inf/NaN, growth after
        ``growth_interval`` clean steps (or ``new_scale`` when given).  Returns it."""
        if not self._enabled:
            return 1.0
        if new_scale is not None:
            value = new_scale.item() if hasattr(new_scale, "item") else new_scale
            self._scale = np.float32(check_number("GradScaler.update", "new_scale", value,
                                                  low=0, low_open=True))
        else:
            if not any(s["stage"] == _STEPPED for s in self._states.values()):
                raise RuntimeError("GradScaler.update: no step() was recorded since the last "
                                   "update(); call scaler.step(optimizer) first")
            self._scale, self._growth_tracker = self._advance()
        for r in self._results:
            r._after = float(self._scale)
            r._scaler = None
        self._results, self._states, self._scaled = [], {}, False
        return float(self._scale)

    # ----- helpers -----------------------------------------------------------------
    def _state(self, optimizer):
        if not hasattr(optimizer, "param_groups"):
            raise TypeError(f"GradScaler: optimizer must be a lezero.optim optimizer, got "
                            f"{describe(optimizer)}")
        return self._states.setdefault(id(optimizer), {"stage": _READY, "nonfinite": ()})

    def _require_scale(self, where):
        if not self._scaled:
            raise RuntimeError(f"GradScaler.{where}: scale() was not called since the last "
                               f"update(); backpropagate scaler.scale(loss) before {where}()")

    def _advance(self):
        """(scale, growth tracker) after this iteration: torch's _amp_update_scale_."""
        found = any(s["nonfinite"] for s in self._states.values() if s["stage"] != _READY)
        if found:
            return np.float32(np.float64(self._scale) * self._backoff_factor), 0
        tracker = self._growth_tracker + 1
        if tracker == self._growth_interval:
            with np.errstate(over="ignore"):
                grown = np.float32(np.float64(self._scale) * self._growth_factor)
            return (grown if np.isfinite(grown) else self._scale), 0
        return self._scale, tracker

    def _next_scale(self):
        return float(self._advance()[0])

    def get_scale(self):
        """The current scale as a Python float (1.0 when disabled)."""
        return float(self._scale) if self._enabled else 1.0

    def is_enabled(self):
        return self._enabled

    def get_growth_factor(self):
        return self._growth_factor

    def get_backoff_factor(self):
        return self._backoff_factor

    def get_growth_interval(self):
        return self._growth_interval

    def state_dict(self):
        """torch's keys: scale, growth_factor, backoff_factor, growth_interval,
        _growth_tracker ({} when disabled)."""
        if not self._enabled:
            return {}
        return {"scale": float(self._scale), "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor,
                "growth_interval": self._growth_interval,
                "_growth_tracker": self._growth_tracker}

    def load_state_dict(self, state_dict):
        """Restore from ``state_dict()`` (or torch's GradScaler.state_dict())."""
        if not self._enabled:
            return
        if not isinstance(state_dict, dict):
            raise TypeError(f"GradScaler.load_state_dict: expected a dict, got "
                            f"{describe(state_dict)}")
        if not state_dict:
            raise ValueError("GradScaler.load_state_dict: the state dict is empty (saved "
                             "from a disabled GradScaler?)")
        keys = ("scale", "growth_factor", "backoff_factor", "growth_interval",
                "_growth_tracker")
        missing = [k for k in keys if k not in state_dict]
        if missing:
            raise ValueError(f"GradScaler.load_state_dict: missing keys {missing}")
        value = lambda k: state_dict[k].item() if hasattr(state_dict[k], "item") \
            else state_dict[k]  # noqa: E731
        self._scale = np.float32(value("scale"))
        self._growth_factor = float(value("growth_factor"))
        self._backoff_factor = float(value("backoff_factor"))
        self._growth_interval = int(value("growth_interval"))
        self._growth_tracker = int(value("_growth_tracker"))

    def __repr__(self):
        return (f"GradScaler(scale={self.get_scale()}, growth_factor={self._growth_factor}, "
                f"backoff_factor={self._backoff_factor}, "
                f"growth_interval={self._growth_interval}, enabled={self._enabled})")
