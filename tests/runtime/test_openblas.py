"""NumPy's OpenBLAS by symbol: its ``cblas_sgemm`` multiplies, and its threads sleep
soon after a product once LeZero is imported (whether NumPy loaded first or not)."""
import os
import subprocess
import sys

import numpy as np
import pytest

from lezero.runtime import openblas
from lezero.runtime.openblas import NO_TRANS, ROW_MAJOR, TRANS


def test_numpy_sgemm_is_found_and_multiplies():
    gemm = openblas.sgemm()
    assert gemm is not None, "NumPy's wheel ships OpenBLAS: its cblas_sgemm must be found"
    rng = np.random.default_rng(0)
    a = rng.standard_normal((5, 7)).astype(np.float32)
    w = rng.standard_normal((6, 9)).astype(np.float32)       # use columns 2:5 of w ...
    out = np.full((5, 10), np.nan, np.float32)                # ... into columns 4:7 of out
    b = rng.standard_normal((7, 9)).astype(np.float32)
    gemm(ROW_MAJOR, NO_TRANS, NO_TRANS, 5, 3, 7, 1.0, a.ctypes.data, 7,
         b[0, 2:].ctypes.data, 9, 0.0, out[0, 4:].ctypes.data, 10)
    np.testing.assert_allclose(out[:, 4:7], a @ b[:, 2:5], rtol=1e-5, atol=1e-5)
    assert np.isnan(out[:, :4]).all() and np.isnan(out[:, 7:]).all()    # ldc respected
    gemm(ROW_MAJOR, NO_TRANS, TRANS, 5, 6, 7, 1.0, a.ctypes.data, 7,
         w[:, :7].copy().ctypes.data, 7, 0.0, out.ctypes.data, 6)
    np.testing.assert_allclose(out.reshape(-1)[:30].reshape(5, 6), a @ w[:, :7].T,
                               rtol=1e-5, atol=1e-5)


_PROBE = """
import resource, time
{first}
a = np.random.default_rng(0).random((400, 400), dtype=np.float32)
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
for _ in range(3):
    a @ a
start = cpu()
time.sleep(0.2)
print(cpu() - start, lezero.runtime.policy.source("blas_thread_timeout"))
"""


@pytest.mark.skipif(openblas.sgemm() is None, reason="needs NumPy's OpenBLAS")
@pytest.mark.parametrize("first", ["import numpy as np\nimport lezero",
                                   "import lezero\nimport numpy as np"])
def test_blas_threads_sleep_soon_after_a_product(first):
    """Without the short timeout OpenBLAS's helper thread spins ~0.1 s after each threaded
    product; with it, a 0.2 s sleep costs the process almost no CPU."""
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_THREAD_TIMEOUT"}
    env.update(OPENBLAS_NUM_THREADS="2", LEZERO_PROFILE="default")
    out = subprocess.run([sys.executable, "-c", _PROBE.format(first=first)], env=env,
                         capture_output=True, text=True, timeout=120, check=True).stdout
    cpu, source = out.split()
    assert source == "default"
    assert float(cpu) < 0.03, f"the BLAS threads spun {float(cpu) * 1e3:.0f} ms while idle"


def test_a_users_timeout_is_kept():
    env = dict(os.environ, OPENBLAS_THREAD_TIMEOUT="7")
    code = ("import lezero, os; p = lezero.runtime.policy; "
            "print(os.environ['OPENBLAS_THREAD_TIMEOUT'], p.blas_thread_timeout, "
            "p.source('blas_thread_timeout'))")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=120, check=True).stdout
    assert out.split() == ["7", "7", "env:", "OPENBLAS_THREAD_TIMEOUT"]
