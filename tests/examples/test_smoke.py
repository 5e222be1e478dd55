"""Every training script in examples/ runs end to end in its ``--smoke`` mode, and the
data, tensor, pipeline and 3D parallel ones also on two ranks under mpiexec.

``--smoke`` trains one epoch of a few batches: it proves the script, its data and its
model work together on the current code, not that the model learns (the examples' own
full runs measure that; see docs/model_zoo.md).
"""
import glob
import os
import re
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


def _mpi_examples():
    """The examples that start lezero.parallel's world (through _ddp or _parallel3d)."""
    found = []
    for path in EXAMPLES:
        with open(path, encoding="utf-8") as f:
            if re.search(r"^from _(?:ddp|parallel3d) import", f.read(), re.M):
                found.append(path)
    return found


MPIEXEC = os.path.join(os.path.dirname(sys.executable), "mpiexec")


def test_the_mpi_examples_are_found():
    names = {os.path.basename(p) for p in _mpi_examples()}
    assert {"train_ddp_cnn.py", "train_ddp_gpt.py", "train_tp_gpt.py", "train_pipeline.py",
            "train_3d_gpt.py"} <= names, names


@pytest.mark.parametrize("path", _mpi_examples(), ids=os.path.basename)
def test_mpi_example_smoke_run_on_two_ranks(path, tmp_path):
    """``mpiexec -n 2 ... --smoke``: both ranks run, rank 0 reports and writes."""
    if not os.path.exists(MPIEXEC):
        pytest.skip("mpiexec comes with the mpi extra (make install)")
    env = dict(os.environ, MPLBACKEND="Agg", OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               NUMBA_NUM_THREADS="1")
    proc = subprocess.run([MPIEXEC, "-n", "2", sys.executable, path, "--smoke", "--out",
                           "out"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=240)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "after epoch" in proc.stdout and (tmp_path / "out" / "summary.json").exists(), \
        proc.stdout[-2000:]
