"""A full run of an example shows a progress bar over its epochs instead of a printed
line per epoch, prints what it achieved once, and draws its training curves."""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_full_run_draws_a_bar_not_a_line_per_epoch(tmp_path):
    env = dict(os.environ, MPLBACKEND="Agg", OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               NUMBA_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "train_mlp.py"),
                           "--epochs", "3", "--out", "run"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert not [line for line in lines if line.startswith("epoch ")], proc.stdout
    final = [line for line in lines if line.startswith("after epoch ")]
    assert len(final) == 1 and final[0].startswith("after epoch 3/3: loss "), proc.stdout
    assert "epochs: 100%" in proc.stderr and "3/3" in proc.stderr        # the tqdm bar
    history = json.loads((tmp_path / "run" / "history.json").read_text())
    assert len(history) == 3
    assert f"test_acc {history[-1]['test_acc']:.4g}" in final[0]
    assert (tmp_path / "run" / "history.png").read_bytes()[:4] == b"\x89PNG"
