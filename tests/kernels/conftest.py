"""Fixtures shared by the kernel tests."""
import pytest

from lezero.kernels import threads


@pytest.fixture
def split_parts(monkeypatch):
    """A list that records the part count of every ``threads.run_split`` call (each call
    still runs)."""
    calls = []
    real = threads.run_split
    monkeypatch.setattr(threads, "run_split",
                        lambda fn, n, parts: calls.append(parts) or real(fn, n, parts))
    return calls
