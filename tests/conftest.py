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
    if lz.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="no CUDA device: CuPy is missing or sees no GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


BACKENDS = ["numpy", pytest.param("cupy", marks=pytest.mark.gpu)]


@pytest.fixture(params=BACKENDS)
def xp(request):
    """The array module under test: numpy, and cupy where a device exists."""
    if request.param == "numpy":
        return np
    import cupy
    return cupy


@pytest.fixture(autouse=True)
def _seed():
    lz.manual_seed(0)
    np.random.seed(0)
