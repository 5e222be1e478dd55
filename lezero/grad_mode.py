"""PyTorch's grad-mode switches: ``lz.set_grad_enabled``, ``lz.inference_mode``,
``lz.is_grad_enabled``, on top of ``Config.enable_backprop`` (``lz.no_grad`` is the core's).

``set_grad_enabled(flag)`` works as torch's does: called as a function it switches the mode
at once (and leaves it switched); as a ``with`` block it restores the previous mode on exit;
as a decorator it switches only inside each call.  ``inference_mode()`` is ``no_grad()``
under torch's name (LeZero has no separate inference tensors).
"""
import functools

from lezero.core import get_config, no_grad, using_config
from lezero.core.config import pop_setting, push_setting
from lezero.utils.checks import check_bool

__all__ = ["set_grad_enabled", "inference_mode", "is_grad_enabled"]


def is_grad_enabled():
    """True when operators record the graph (outside ``no_grad``)."""
    return bool(get_config().enable_backprop)


class set_grad_enabled:
    """Turn graph recording on or off: now, inside a ``with`` block, or in a decorated
    function."""

    def __init__(self, mode):
        self.mode = check_bool("set_grad_enabled", "mode", mode)
        self._token = push_setting("enable_backprop", self.mode)   # effective at once

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self._token is not None:
            pop_setting(self._token)
            self._token = None
        return False

    def __call__(self, fn):
        self.__exit__()          # decorating is not switching: restore, then per call
        mode = self.mode

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with using_config("enable_backprop", mode):
                return fn(*args, **kwargs)
        return wrapper


def inference_mode(mode=True):
    """``no_grad()`` under PyTorch's name: a context manager or decorator
    (``@lz.inference_mode`` and ``@lz.inference_mode()`` both work)."""
    if callable(mode):                           # used bare as a decorator
        return inference_mode(True)(mode)
    check_bool("inference_mode", "mode", mode)
    return no_grad() if mode else using_config("enable_backprop", get_config().enable_backprop)
