"""Jobs that fail on one rank end quickly with a message (each one ``mpiexec -n 2`` in a
subprocess with its own time limit); and the mpiexec examples run on two ranks.

These run in the normal suite (no mpiexec around pytest).  Under ``mpiexec -n K`` with
K > 1 they skip: a job launched from inside a job would nest launchers.
"""
import os
import re
import subprocess
import sys
import time

import pytest

from lezero.parallel import _mpi

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MPIEXEC = os.path.join(os.path.dirname(sys.executable), "mpiexec")

pytestmark = [pytest.mark.timeout(120), pytest.mark.skipif(
    _mpi.launched_size() > 1, reason="already inside an mpiexec job"), pytest.mark.skipif(
    not (os.path.exists(MPIEXEC) and _mpi.have_mpi4py()), reason="needs mpiexec and mpi4py")]


def launch(args, limit=60, ranks=2, env=None):
    """Run ``mpiexec -n ranks python args...``; (return code, stdout, stderr, end time)."""
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("PMI_", "MPI_LOCAL", "OMPI_", "PMIX_", "HYDRA"))}
    clean.update(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", NUMBA_NUM_THREADS="1",
                 PYTHONPATH=ROOT, MPLBACKEND="Agg", **(env or {}))
    proc = subprocess.run([MPIEXEC, "-n", str(ranks), sys.executable, *args], cwd=ROOT,
                          env=clean, capture_output=True, text=True, timeout=limit)
    return proc.returncode, proc.stdout, proc.stderr, time.time()


def job(mode):
    code, out, err, end = launch([os.path.join(HERE, "failing_job.py"), mode])
    # ranks share stdout, so another rank's text may follow a mark on the same line
    marks = [float(t) for t in re.findall(r"MARK (\d+\.\d+)", out)]
    assert marks, out + err
    return code, out, err, end - marks[0]


def test_an_exception_on_one_rank_ends_the_job_with_its_traceback():
    code, out, err, seconds = job("raise")
    assert code != 0
    assert "rank 1 of 2 raised an uncaught exception; aborting all 2 ranks" in err
    assert "[rank 1] ValueError: boom on rank 1" in err
    assert "finished" not in out                   # rank 0 did not carry on
    assert seconds < 10, f"the job took {seconds:.1f} s to end after the exception"


def test_a_rank_that_skips_a_collective_gets_a_stall_report():
    code, out, err, seconds = job("skip")
    assert code != 0
    assert "stall on communicator 'world' (rank 0 of 2)" in err
    assert "for allreduce #2 (sum, float32[4], 16 B) to complete" in err
    assert "rank 1 has not arrived: no answer" in err
    assert "ranks not arrived at allreduce #2: [1]" in err
    assert seconds < 15, f"the stall took {seconds:.1f} s to end the job (timeout 2 s)"


def test_the_stall_report_says_what_the_missing_rank_waits_for():
    code, out, err, seconds = job("wait")
    assert code != 0
    # whichever rank times out first reports; both know what the other does
    assert ("rank 1 has not arrived: its last collective is allreduce #1" in err
            and "waiting for recv (from rank 0, tag 9" in err) or \
        ("rank 0: last collective allreduce #2" in err and "waiting for allreduce #2" in err)
    assert seconds < 15


def test_uneven_batches_without_join_end_with_a_hint():
    code, out, err, seconds = job("uneven")
    assert code != 0
    assert re.search(r"for allreduce #\d+ \(bucket [01] of 2, sum, float32\[\d+\]", err), err
    assert "use DataParallel.join() or DistributedSampler(drop_last=True)" in err
    assert seconds < 15


@pytest.mark.parametrize("script", ["train_ddp_cnn.py", "train_ddp_gpt.py"])
def test_examples_on_two_ranks(script, tmp_path):
    code, out, err, _ = launch([os.path.join(ROOT, "examples", script), "--smoke", "--out",
                                str(tmp_path)], limit=100)
    assert code == 0, out[-2000:] + err[-3000:]
    assert "2 ranks" in out
    assert os.path.exists(tmp_path / "summary.json") and os.path.exists(tmp_path / "timeline.json")
