"""The static graph on CuPy arrays: replay, the NumPy path of fused nodes (the Numba
kernels are CPU-only), training replay and saving (weights come back to the CPU)."""
import numpy as np
import pytest

import lezero as lz
import lezero.functions as F
from lezero import jit, nn

pytestmark = pytest.mark.gpu


def test_replay_and_fused_nodes_on_the_gpu(tmp_path):
    import cupy
    lz.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                          nn.Flatten(), nn.Linear(4 * 8 * 8, 3)).eval()
    x = np.random.default_rng(0).standard_normal((2, 3, 8, 8)).astype(np.float32)
    with lz.no_grad():
        ref = model(x).data
    model.to_gpu()
    xg = cupy.asarray(x)
    g = jit.trace(model, xg)
    assert g.graph.op_counts().get("Fused")
    with lz.no_grad():
        out = g(xg).data
    assert isinstance(out, cupy.ndarray)
    np.testing.assert_allclose(cupy.asnumpy(out), ref, rtol=1e-4, atol=1e-5)
    with pytest.raises(jit.GuardError, match="array backend numpy, traced with cupy"):
        g(x)
    F.sum(g(xg) ** 2).backward()
    assert isinstance(model[0].weight.grad.data, cupy.ndarray)
    loaded = jit.load(g.save(str(tmp_path / "m.lzg")))
    with lz.no_grad():
        np.testing.assert_allclose(loaded(x).data, ref, rtol=1e-4, atol=1e-5)
