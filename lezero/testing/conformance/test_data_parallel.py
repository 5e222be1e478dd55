"""DataParallel on the device: one SGD step on each rank's shard equals one process on the
whole batch, and every rank ends with the same parameters.  Alone it runs with one rank;
``mpiexec -n 2 pytest --pyargs lezero.testing.conformance -k data_parallel`` runs the
collectives (gradients from the device to the wire and back)."""
import numpy as np
import pytest

import lezero as lz
import lezero.functions as F
from lezero import cuda, nn, optim

GLOBAL_BATCH = 8


def _mlp():
    return nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))


def _step(model, opt, x, t):
    opt.zero_grad()
    F.cross_entropy(model(x), t).backward()
    opt.step()


def test_data_parallel_step_matches_one_process(on_device):
    parallel = pytest.importorskip("lezero.parallel")
    pytest.importorskip("mpi4py")
    comm = parallel.init(timeout=30)
    if GLOBAL_BATCH % comm.size:
        pytest.skip(f"{comm.size} ranks do not divide a batch of {GLOBAL_BATCH}")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((GLOBAL_BATCH, 6)).astype(np.float32)
    t = rng.integers(0, 3, GLOBAL_BATCH)
    lz.manual_seed(0)
    ref = _mlp().to_gpu()
    lz.manual_seed(0)
    dp = parallel.DataParallel(_mlp().to_gpu(), comm)
    _step(ref, optim.SGD(ref.parameters(), lr=0.5), cuda.as_cupy(x), cuda.as_cupy(t))
    n = GLOBAL_BATCH // comm.size
    rows = slice(comm.rank * n, (comm.rank + 1) * n)
    _step(dp, optim.SGD(dp.parameters(), lr=0.5), cuda.as_cupy(x[rows]), cuda.as_cupy(t[rows]))
    mine = dp.module.state_dict()
    assert all(isinstance(p.data, on_device.array_types) for p in dp.parameters())
    for key, want in ref.state_dict().items():
        np.testing.assert_allclose(cuda.as_numpy(mine[key]), cuda.as_numpy(want),
                                   rtol=1e-5, atol=1e-6, err_msg=key)
    flat = np.concatenate([cuda.as_numpy(v).ravel() for v in mine.values()])
    assert all(np.array_equal(flat, other) for other in comm.allgather(flat))
