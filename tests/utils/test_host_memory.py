"""keep_freed_memory: freed host memory is reused (glibc) once asked for; import lezero
changes nothing."""
import subprocess
import sys

import pytest

from lezero.utils import host_memory

GLIBC = sys.platform.startswith("linux") and host_memory._mallopt() is not None


@pytest.mark.skipif(not GLIBC, reason="needs glibc's mallopt")
def test_keep_freed_memory_applies_the_defaults_and_freed_arrays_stop_faulting():
    # A training step in miniature: many 2 MiB arrays alive at once, then all freed.
    code = ("import resource, numpy as np, lezero\n"
            "from lezero.utils import host_memory as h\n"
            "assert h.keep_freed_memory()\n"
            "assert h.applied() == (h.MMAP_THRESHOLD, h.TRIM_THRESHOLD), h.applied()\n"
            "def step():\n"
            "    arrays = [np.ones(1 << 18) for _ in range(20)]\n"
            "for _ in range(3): step()\n"
            "r0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt\n"
            "for _ in range(20): step()\n"
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - r0)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True,
                         text=True, check=True).stdout
    # With glibc's defaults the heap is trimmed after every step and the 20 steps take
    # about 200 000 page faults (measured); kept memory takes none.
    assert int(out) < 1000


@pytest.mark.skipif(not GLIBC, reason="needs glibc's mallopt")
def test_import_lezero_leaves_the_allocator_alone():
    code = "import lezero; from lezero.utils import host_memory as h; print(h.applied())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True,
                         text=True, check=True).stdout
    assert out.strip() == "None"


@pytest.mark.parametrize("bad,kind", [(0, ValueError), (-5, ValueError), (1.5, TypeError),
                                      (True, TypeError), ("big", TypeError)])
def test_bad_thresholds_name_the_argument(bad, kind):
    with pytest.raises(kind, match="keep_freed_memory: mmap_threshold"):
        host_memory.keep_freed_memory(mmap_threshold=bad)
    with pytest.raises(kind, match="trim_threshold"):
        host_memory.keep_freed_memory(trim_threshold=bad)
