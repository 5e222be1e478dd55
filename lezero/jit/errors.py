"""The errors and warnings of ``lezero.jit``: each says what went wrong and where."""

from lezero.utils.files import FileFormatError

__all__ = ["TraceError", "GuardError", "VerifyError", "GraphFormatError", "TracerWarning"]


class TraceError(ValueError):
    """A run cannot be turned into a static graph (no Variable returned, a value that
    depends on the inputs would be frozen, control flow that changed with the data...)."""


class GuardError(ValueError):
    """A StaticGraph was called with inputs (shapes, dtypes, mode) it was not traced for;
    the message lists every difference."""


class VerifyError(AssertionError):
    """``verify=N``: the static graph's outputs differ from eager execution."""


class GraphFormatError(FileFormatError):
    """A saved graph (``.lzg``) is corrupt, truncated or of an unknown version."""


class TracerWarning(UserWarning):
    """Something read during the trace may make the graph valid for these inputs only
    (a value read with ``.item()``, ``bool()``, ``float()``...)."""
