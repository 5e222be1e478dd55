"""The one owner of threads and BLAS in LeZero: the policy, the scheduler, the BLAS guard.

    import lezero.runtime
    lezero.runtime.show()                    # every setting: value and where it came from
    lezero.runtime.use_profile("serial")     # no threads anywhere ("default" restores)
    lezero.runtime.policy.small_flops = 4e6  # a threshold, changed in code

Modules, bottom up: ``variables`` (the environment variables LeZero reads), ``openblas``
(NumPy's OpenBLAS by symbol: its threads' spin, its sgemm), ``lazyjit`` (Numba imported
on first use; ``@jit`` kernels), ``settings`` (the policy: every threshold and setting),
``blas`` (the threadpoolctl controller, the one-thread guard, small products), ``mkl``
(Intel MKL by ctypes, sequential), ``gemm`` (products on MKL split over threads), ``waits``
(atomic counters; spin briefly, then sleep), ``workers`` (the worker threads and their
join), ``scheduler`` (``run_parts`` and the splits built on it), ``adaptive`` (a split
kept only while measured faster), ``products`` (two products at once), ``budget`` (the
memory that recomputable transforms kept for backward may hold).
``lezero.kernels`` builds on these; nothing in ``kernels/`` starts a thread or touches
BLAS's settings itself.
"""
from lezero.runtime.openblas import settle_threads

_blas_timeout = settle_threads()   # first: before NumPy loads, when LeZero is imported first

from lezero.runtime.settings import (PROFILES, policy, rows, show,  # noqa: E402
                                   use_profile)
from lezero.runtime.variables import getenv  # noqa: E402
from lezero.runtime.blas import held_to_one_thread, one_blas_thread  # noqa: E402
from lezero.runtime.scheduler import (launch, limited_to, run_elementwise,  # noqa: E402
                                      run_parts, run_ranges, run_split, serial_kernels,
                                      serial_only, split, threads, threads_for)
from lezero.runtime.adaptive import Faster, SplitWhenFaster, run_meeting, run_update  # noqa: E402
# For Numba kernels that call a product or meet their partners themselves (the LSTM's
# chunks, attention's heads): NumPy's sgemm and the bounded barrier, as kernel arguments
# and callees.  ``kernels/`` reaches the runtime only through these public names.
from lezero.runtime.blas import is_small  # noqa: E402
from lezero.runtime.openblas import NO_TRANS, ROW_MAJOR, TRANS  # noqa: E402
from lezero.runtime.gemm import native_threads as native_products, sgemm  # noqa: E402
from lezero.runtime.gemm_team import available as team_available  # noqa: E402
from lezero.runtime.waits import arrive_and_wait, sleep_available  # noqa: E402
from lezero.runtime import settings as _settings  # noqa: E402
from lezero.runtime import budget  # noqa: E402,F401

policy.define("blas_thread_timeout", getenv("OPENBLAS_THREAD_TIMEOUT", ""),
              "OPENBLAS_THREAD_TIMEOUT: NumPy's BLAS threads spin 2^n cycles after a product",
              _blas_timeout)
_settings.apply_environment()

__all__ = ["policy", "show", "rows", "use_profile", "PROFILES", "getenv", "threads",
           "threads_for", "limited_to", "split", "run_parts", "run_split", "run_ranges", "run_meeting",
           "run_elementwise", "launch", "serial_kernels", "serial_only", "held_to_one_thread",
           "one_blas_thread", "Faster", "SplitWhenFaster", "run_update", "is_small", "sgemm",
           "team_available", "native_products",
           "ROW_MAJOR", "NO_TRANS", "TRANS", "arrive_and_wait", "sleep_available"]
