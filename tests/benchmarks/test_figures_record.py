"""The benchmarks behind docs/parallel.md record their figures blocks: an MPI benchmark
started plainly relaunches itself under mpiexec, and rank 0's report passes through the
parent, which ``--record`` saves (a stand-in mpiexec here, no MPI needed); the 3D
projection's block is what the cost model computes today."""
import os
import stat
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCH = os.path.join(ROOT, "benchmarks")
sys.path.insert(0, BENCH)
sys.path.insert(0, os.path.join(ROOT, "tools"))
import _mpi_bench  # noqa: E402
import _record  # noqa: E402

from .test_record import site  # noqa: E402,F401  (a page with block bench_x, in tmp_path)


@pytest.fixture
def fake_mpiexec(tmp_path, monkeypatch):
    """``relaunch`` takes mpiexec from the interpreter's folder: put a stand-in there that
    drops ``-n N`` and the interpreter and runs the script once, with this Python."""
    folder = tmp_path / "bin"
    folder.mkdir()
    mpiexec = folder / "mpiexec"
    mpiexec.write_text(f'#!/bin/sh\nshift 3\nexec "{sys.executable}" "$@"\n')
    mpiexec.chmod(mpiexec.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setattr(sys, "executable", str(folder / "python"))
    return mpiexec


def test_a_relaunched_mpi_run_is_recorded_from_rank_0s_output(site, fake_mpiexec, tmp_path,
                                                              monkeypatch):
    child = tmp_path / "child.py"
    child.write_text("import os, sys\nprint('rank 0 table', sys.argv[1:])\n"
                     "print('threads', os.environ['OMP_NUM_THREADS'])\n")
    monkeypatch.setattr(sys, "argv", [os.path.join(BENCH, "bench_ddp.py"), "--quick",
                                      "--record", "bench_x"])
    assert _record.run_main(lambda: _mpi_bench.relaunch(str(child), 2)) == 0
    saved = (tmp_path / "figures" / "bench_x.md").read_text()
    head, body = saved.split("\n", 1)
    assert "`python benchmarks/bench_ddp.py --quick`" in head     # the command, no --record
    # the child got the arguments without --record, and one BLAS thread
    assert "rank 0 table ['--quick']\nthreads 1\n" in body
    assert "old 9.9x" not in site.read_text() and body in site.read_text()


def test_a_failing_relaunch_returns_its_status_and_records_nothing(site, fake_mpiexec,
                                                                   tmp_path, monkeypatch):
    child = tmp_path / "child.py"
    child.write_text("import sys\nprint('half a table')\nsys.exit(3)\n")
    monkeypatch.setattr(sys, "argv", [str(child)])
    assert _mpi_bench.relaunch(str(child), 2) == 3
    assert not (tmp_path / "figures" / "bench_x.md").exists()


def test_the_3d_projection_block_is_what_the_cost_model_computes_today(monkeypatch,
                                                                       capsys):
    import bench_3d_projection
    import lezero.utils.files
    monkeypatch.setattr(lezero.utils.files, "atomic_write", lambda path, text: None)
    bench_3d_projection.main()
    today = capsys.readouterr().out.strip("\n")
    with open(os.path.join(ROOT, "docs", "figures", "bench_3d_projection.md")) as f:
        recorded = f.read()
    body = recorded.split("```text\n", 1)[1].rsplit("\n```", 1)[0]
    assert body == today, ("benchmarks/_cost_model_3d.py changed: rerun "
                           "`python benchmarks/bench_3d_projection.py --record`")
    assert "best: dp=" in body and "efficiency" in body
