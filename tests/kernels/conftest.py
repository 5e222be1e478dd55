"""Fixtures shared by the kernel tests: the runtime's (a test of how a kernel's work is
split asks for ``threaded`` or ``split_parts``)."""
from tests.runtime.conftest import split_parts, threaded  # noqa: F401
