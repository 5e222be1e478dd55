"""The machine model behind the algorithms' predicted times (``Algorithm.predict``).

Single-thread constants measured on the 2-core development machine, held by the
runtime's policy as its machine profile (``lezero.runtime.policy.machine_*``, listed by
``lezero.runtime.show()``): OpenBLAS sgemm ~75 GFLOP/s on one core, Numba kernels and
NumPy copies streaming ~6 GB/s.  Products that are split over the batch (``parallel``)
divide by the number of parts.  Only the ranking matters for ``algo="auto"``;
autotuning replaces the model by measurements.
"""
from lezero.runtime import policy


class _Profile:
    """``MACHINE[key]``: the policy's ``machine_<key>`` (read when used, so a change to
    the policy reaches the model)."""

    def __getitem__(self, key):
        return policy.machine(key)


MACHINE = _Profile()


def gemm_seconds(m, n, k, batch=1, complex_=False):
    """Predicted time of one stacked matmul of ``batch`` (m x k) @ (k x n) products."""
    flops = 2.0 * m * n * k * batch * (4 if complex_ else 1)
    small = min(m, n, k)
    if small == 0:                      # an empty batch or channel dim: nothing to multiply
        return MACHINE["call_s"]
    rate = MACHINE["gemm_gflops"] * 1e9 * small / (small + MACHINE["gemm_half_dim"])
    return flops / rate + MACHINE["call_s"] + batch * MACHINE["gemm_matrix_s"]


def stream_seconds(nbytes, calls=1, planes=0):
    """Predicted time to stream ``nbytes`` through memory in ``calls`` calls that loop
    over ``planes`` planes."""
    return (nbytes / (MACHINE["stream_gbps"] * 1e9) + calls * MACHINE["call_s"]
            + planes * MACHINE["plane_s"])
