"""Every training script in examples/ runs end to end in its ``--smoke`` mode.

``--smoke`` trains one epoch of a few batches: it proves the script, its data and its
model work together on the current code, not that the model learns (the examples' own
full runs measure that; see docs/model_zoo.md).
"""
import glob
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = sorted(p for p in glob.glob(os.path.join(ROOT, "examples", "*.py"))
                  if not os.path.basename(p).startswith("_"))
# Scripts that need mpiexec, a server or an optional tool name themselves here with why.
NEEDS_MORE = {}


@pytest.mark.parametrize("path", EXAMPLES, ids=os.path.basename)
def test_example_smoke_run(path, tmp_path):
    name = os.path.basename(path)
    if name in NEEDS_MORE:
        pytest.skip(NEEDS_MORE[name])
    env = dict(os.environ, MPLBACKEND="Agg", OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               NUMBA_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, path, "--smoke", "--out", str(tmp_path / "out")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert proc.stdout.strip(), "an example prints what it achieved"
