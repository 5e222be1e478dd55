"""Fixtures of the runtime's tests (the kernel tests use them too)."""
import pytest

from lezero import runtime
from lezero.runtime import scheduler


@pytest.fixture
def threaded():
    """The default profile inside the test, for a test that checks how work is split:
    under ``LEZERO_PROFILE=serial`` (``make test-serial``) nothing would be."""
    profile = runtime.policy.profile
    runtime.use_profile("default")
    yield
    runtime.use_profile(profile)


@pytest.fixture
def split_parts(monkeypatch, threaded):
    """A list that records the part count of every ``run_split`` call (each call still
    runs), in the ``threaded`` set-up."""
    calls = []
    real = scheduler.run_split
    monkeypatch.setattr(scheduler, "run_split",
                        lambda fn, n, parts: calls.append(parts) or real(fn, n, parts))
    return calls
