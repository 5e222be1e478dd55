"""Fixtures of the conformance suite: the backend under test, and that backend made the
default device (so ``to_gpu()`` moves there) for the tests that ask for ``on_device``."""
import numpy as np
import pytest

import lezero as lz
from lezero import backends
from lezero.testing.conformance import backend_name


@pytest.fixture(scope="session")
def backend():
    b = backends.get(backend_name())
    if not b.is_available():
        pytest.skip(f"backend {b.name!r} has no device here")
    return b


@pytest.fixture
def on_device(backend, monkeypatch):
    monkeypatch.setenv("LEZERO_BACKEND", backend.name)
    return backend


@pytest.fixture(autouse=True)
def _seed():
    lz.manual_seed(0)
    np.random.seed(0)


def pytest_configure(config):
    # the operator table (a LeZero test module) marks its CuPy runs with these
    config.addinivalue_line("markers", "gpu: needs CuPy and a CUDA device")
