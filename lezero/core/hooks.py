"""Function hooks: observe (or, before forward, adjust) every Function call in a ``with``
block.  ``lezero.utils.profiling.TimerHook`` and ``amp.autocast`` are built on them.
"""
from lezero.core.config import get_config, pop_setting, push_setting


class FunctionHook:
    """Base class: override any of the four callbacks; use the object as a context manager."""

    def __enter__(self):
        tokens = self.__dict__.setdefault("_tokens", [])     # a hook may be entered twice
        tokens.append(push_setting("function_hooks", get_config().function_hooks + (self,)))
        return self

    def __exit__(self, *exc):
        pop_setting(self._tokens.pop())
        return False

    def transform_inputs(self, function, inputs):
        """Return the input Variables ``function`` should run on (default: unchanged).

        Called before anything is recorded, so a hook may put Functions of its own in front
        of the inputs (``amp.autocast`` inserts casts this way).  A hook that calls
        Functions here must let its own Functions through unchanged."""
        return inputs

    def forward_preprocess(self, function, in_data):
        """Before ``function.forward`` runs on the arrays ``in_data``."""

    def forward_postprocess(self, function, in_data):
        """After ``function.forward`` returned (its outputs are not made yet)."""

    def backward_preprocess(self, function, grad_outputs):
        """Before ``function.backward`` runs on the Variables ``grad_outputs``."""

    def backward_postprocess(self, function, grad_outputs):
        """After ``function.backward`` returned."""
