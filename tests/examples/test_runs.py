"""Where examples write: a --smoke run never over a real run's ``runs/NAME`` (it writes
``runs/NAME-smoke`` unless --out says otherwise), ``serve_mlp.py`` never over
``train_mlp.py``'s ``runs/mlp``, and a run that fails before writing leaves no folder."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENV = dict(os.environ, MPLBACKEND="Agg", OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
           NUMBA_NUM_THREADS="1")


def _run(tmp_path, script, *args):
    return subprocess.run([sys.executable, os.path.join(ROOT, "examples", script), *args],
                          cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=300)


def test_serve_mlp_smoke_leaves_train_mlps_run_alone(tmp_path):
    real = tmp_path / "runs" / "mlp"
    real.mkdir(parents=True)
    (real / "model.npz").write_bytes(b"train_mlp.py's weights")
    proc = _run(tmp_path, "serve_mlp.py", "--smoke")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert (tmp_path / "runs" / "serve_mlp-smoke" / "summary.json").exists()
    assert sorted(os.listdir(real)) == ["model.npz"]
    assert (real / "model.npz").read_bytes() == b"train_mlp.py's weights"


def test_a_run_that_fails_before_writing_leaves_no_folder(tmp_path):
    proc = _run(tmp_path, "train_mlp.py", "--resume", "missing.npz")
    assert proc.returncode != 0
    assert "missing.npz" in proc.stderr
    assert os.listdir(tmp_path) == [], os.listdir(tmp_path)


def test_a_failed_run_keeps_a_folder_that_was_there(tmp_path):
    (tmp_path / "mine").mkdir()
    proc = _run(tmp_path, "train_mlp.py", "--resume", "missing.npz", "--out", "mine")
    assert proc.returncode != 0
    assert (tmp_path / "mine").is_dir()
