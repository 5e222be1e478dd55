"""import lezero keeps freed host memory for reuse (glibc), with an opt-out."""
import os
import subprocess
import sys

import pytest

from lezero.core import host_memory

GLIBC = sys.platform.startswith("linux") and host_memory._mallopt() is not None


@pytest.mark.skipif(not GLIBC, reason="needs glibc's mallopt")
def test_import_applies_the_defaults_and_freed_arrays_stop_faulting():
    # A training step in miniature: many 2 MiB arrays alive at once, then all freed.
    code = ("import resource, numpy as np, lezero\n"
            "from lezero.core import host_memory as h\n"
            "assert h.applied() == (h.MMAP_THRESHOLD, h.TRIM_THRESHOLD), h.applied()\n"
            "def step():\n"
            "    arrays = [np.ones(1 << 18) for _ in range(20)]\n"
            "for _ in range(3): step()\n"
            "r0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt\n"
            "for _ in range(20): step()\n"
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - r0)\n")
    env = {k: v for k, v in os.environ.items() if k != "LEZERO_HOST_ALLOCATOR"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True).stdout
    # With glibc's defaults the heap is trimmed after every step and the 20 steps take
    # about 200 000 page faults (measured); kept memory takes none.
    assert int(out) < 1000


@pytest.mark.skipif(not GLIBC, reason="needs glibc's mallopt")
def test_opt_out_keeps_glibc_settings():
    code = "import lezero; from lezero.core import host_memory as h; print(h.applied())"
    env = dict(os.environ, LEZERO_HOST_ALLOCATOR="system")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True).stdout
    assert out.strip() == "None"


@pytest.mark.parametrize("bad", [0, -5, 1.5, True, "big"])
def test_bad_thresholds_name_the_argument(bad):
    with pytest.raises(ValueError, match="keep_freed_memory: mmap_threshold"):
        host_memory.keep_freed_memory(mmap_threshold=bad)
    with pytest.raises(ValueError, match="trim_threshold"):
        host_memory.keep_freed_memory(trim_threshold=bad)
