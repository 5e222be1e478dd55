"""Automatic mixed precision: ``autocast``, the cast policy, ``GradScaler``, a precision report.

    scaler = amp.GradScaler()
    for x, t in loader:
        opt.zero_grad()
        with amp.autocast():                       # float16 ("bfloat16" with ml_dtypes)
            loss = F.cross_entropy(model(x), t)
        scaler.scale(loss).backward()
        result = scaler.step(opt)                  # skipped when a gradient is inf/NaN
        scaler.update()

``print(amp.cast_policy)`` shows what each operator runs in; docs/amp.md has the table,
how it differs from torch.autocast, and what runs where (NumPy, CuPy).
"""
from lezero.amp.autocast import autocast, get_autocast_dtype, is_autocast_enabled
from lezero.amp.cast import Cast, cast
from lezero.amp.grad_scaler import GradScaler, StepResult
from lezero.amp.policy import (TREATMENTS, CastPolicy, cast_policy, custom_bwd, custom_fwd,
                               policy)
from lezero.amp.report import PrecisionReport, precision_report

__all__ = ["autocast", "is_autocast_enabled", "get_autocast_dtype", "Cast", "cast",
           "GradScaler", "StepResult", "cast_policy", "policy", "CastPolicy", "TREATMENTS",
           "custom_fwd", "custom_bwd", "precision_report", "PrecisionReport"]
