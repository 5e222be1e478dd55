"""The machine model behind the algorithms' predicted times (``Algorithm.predict``).

Single-thread constants measured on the 2-core development machine (OpenBLAS sgemm
~75 GFLOP/s on one core; Numba kernels and NumPy copies stream ~6 GB/s).  Products that
are split over the batch (``parallel``) divide by the number of parts.  Only the ranking
matters for ``algo="auto"``; autotuning replaces the model by measurements.
"""
MACHINE = {
    "gemm_gflops": 75.0,       # large sgemm, one thread
    "gemm_half_dim": 48.0,     # smallest GEMM dim at which sgemm reaches half its speed
    "gemm_matrix_s": 1e-6,     # overhead per matrix of a stacked (batched) matmul
    "stream_gbps": 6.0,        # a Numba kernel or NumPy copy that streams memory
    "call_s": 15e-6,           # fixed cost of one NumPy call
    "plane_s": 0.5e-6,         # fixed cost per (n, c) plane in a Numba kernel
    "fft_gflops": 3.0,         # pocketfft throughput (2.5 N log2 N flops per real transform)
}


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
