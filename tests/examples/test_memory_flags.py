"""``--amp`` and ``--checkpoint`` (examples/_amp.py) run in the classifier examples."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_lenet_smoke_run_with_amp_and_checkpoint(tmp_path):
    env = dict(os.environ, MPLBACKEND="Agg", OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               NUMBA_NUM_THREADS="1")
    script = os.path.join(ROOT, "examples", "train_lenet.py")
    proc = subprocess.run([sys.executable, script, "--smoke", "--amp", "--checkpoint",
                           "--out", str(tmp_path / "out")], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "checkpointing: features" in proc.stdout
    assert "mixed precision: autocast(float16) with loss scaling" in proc.stdout
    assert "final test accuracy" in proc.stdout
