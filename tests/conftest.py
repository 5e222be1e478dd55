"""Shared pytest set-up: markers, the array-backend fixture, deterministic seeds."""
import numpy as np
import pytest

import lezero as lz


def pytest_configure(config):
    try:    # the oracle runs single-threaded: two xdist workers share two cores
        import torch
        torch.set_num_threads(1)
    except ImportError:
        pass
    config.addinivalue_line("markers", "gpu: needs CuPy and a CUDA device")
    config.addinivalue_line("markers", "mpi: run under mpiexec (tests/parallel)")
    config.addinivalue_line("markers", "slow: takes more than a few seconds")


def pytest_collection_modifyitems(config, items):
    from lezero import backends
    if backends.get("cupy").is_available():    # CuPy itself (not LEZERO_BACKEND's device):
        return                                 # gpu-marked tests import cupy
    skip = pytest.mark.skip(reason="no CUDA device: CuPy is missing or sees no GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


BACKENDS = ["numpy", "strict", pytest.param("cupy", marks=pytest.mark.gpu)]


@pytest.fixture(params=BACKENDS)
def xp(request):
    """The array module under test: numpy, the strict device (CuPy's behaviour on NumPy
    memory, lezero.backends.strict), and cupy where a device exists."""
    if request.param == "numpy":
        return np
    from lezero import backends
    return backends.get(request.param).xp


@pytest.fixture(params=["with_ml_dtypes", "without_ml_dtypes"])
def ml_dtypes_state(request, monkeypatch):
    """Run a test twice: with ``ml_dtypes`` importable and with it missing.

    Yields the expected dtype of a loaded bfloat16/float8 leaf: ``ml_dtypes``' own dtype
    when the package is there, float32 (holding the same values) when it is not.
    """
    if request.param == "without_ml_dtypes":
        import sys
        monkeypatch.setitem(sys.modules, "ml_dtypes", None)   # import now raises ImportError
        return lambda name: np.dtype(np.float32)
    ml_dtypes = pytest.importorskip("ml_dtypes")
    return lambda name: np.dtype(getattr(ml_dtypes, name))


@pytest.fixture(autouse=True)
def _seed():
    lz.manual_seed(0)
    np.random.seed(0)
