"""What a run of an example shows: on a terminal a progress bar over its epochs (the
latest metrics beside it), in a log file or a pipe one plain line per epoch (the last
one is the run's ``after epoch`` line) and no carriage returns or escape sequences; a smoke run announces only the files it writes;
``train_acc`` is over the samples seen."""
import fcntl
import json
import os
import pty
import struct
import subprocess
import sys
import termios
import threading

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENV = dict(os.environ, MPLBACKEND="Agg", OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
           NUMBA_NUM_THREADS="1")
MLP = os.path.join(ROOT, "examples", "train_mlp.py")


def test_a_run_into_a_log_prints_a_plain_line_per_epoch(tmp_path):
    proc = subprocess.run([sys.executable, MLP, "--epochs", "3", "--out", "run"],
                          cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    for stream in (proc.stdout, proc.stderr):
        assert "\r" not in stream and "\x1b" not in stream, repr(stream[-500:])
    lines = proc.stdout.splitlines()
    epochs = [line for line in lines if line.startswith("epoch ")]
    assert [line.split(":")[0] for line in epochs] == ["epoch 1/3", "epoch 2/3"]
    final = [line for line in lines if line.startswith("after epoch ")]
    assert len(final) == 1 and final[0].startswith("after epoch 3/3: loss "), proc.stdout
    history = json.loads((tmp_path / "run" / "history.json").read_text())
    assert len(history) == 3
    assert f"test_acc {history[-1]['test_acc']:.4g}" in final[0]
    assert (tmp_path / "run" / "history.png").read_bytes()[:4] == b"\x89PNG"
    assert "history.json and history.png" in proc.stdout


def _run_on_a_terminal(args, cwd):
    """Run with stderr on a pseudo-terminal; returns (status, stdout, what the terminal
    showed)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))   # 100 cols
    proc = subprocess.Popen(args, cwd=cwd, env=ENV, stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    shown = []

    def read():
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:                      # the terminal closed
                return
            if not chunk:
                return
            shown.append(chunk)
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    out = proc.stdout.read().decode()
    status = proc.wait(timeout=300)
    reader.join(timeout=10)
    os.close(master)
    return status, out, b"".join(shown).decode(errors="replace")


def test_a_run_on_a_terminal_draws_a_bar_not_a_line_per_epoch(tmp_path):
    status, out, shown = _run_on_a_terminal([sys.executable, MLP, "--epochs", "2", "--out",
                                             "run"], tmp_path)
    assert status == 0, out[-2000:] + shown[-3000:]
    assert not [line for line in out.splitlines() if line.startswith("epoch ")], out
    assert "epochs: 100%" in shown and "2/2" in shown, shown[-2000:]
    assert [line for line in out.splitlines() if line.startswith("after epoch 2/2: loss ")]


def test_a_smoke_run_announces_only_what_it_writes(tmp_path):
    proc = subprocess.run([sys.executable, MLP, "--smoke", "--out", "run"], cwd=tmp_path,
                          env=ENV, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert not (tmp_path / "run" / "history.png").exists()
    assert "png" not in proc.stdout and "the weights, history.json to run" in proc.stdout, \
        proc.stdout


def test_train_acc_and_test_acc_count_the_samples_seen(tmp_path, monkeypatch):
    """Under --smoke (3 batches) a model that is always right scores 1.0, not the
    share of the whole set that those batches hold."""
    monkeypatch.syspath_prepend(os.path.join(ROOT, "examples"))
    for name in ("_common", "_classify"):                # benchmarks/ has a _common too
        monkeypatch.delitem(sys.modules, name, raising=False)
    import _classify
    import _common
    from lezero import nn
    monkeypatch.setattr(_common, "_smoke", False)        # put back after the test
    p = _classify.classifier_parser("acc", "", epochs=1, batch_size=16, lr=0.01,
                                    image_size=8, channels=1)
    args = _common.check_args(p, p.parse_args(["--smoke", "--out", str(tmp_path / "out")]))
    model = nn.Sequential(nn.Flatten(), nn.Linear(64, 10))
    model[1].bias.data[0] = 1e3                           # always class 0
    x, t = np.zeros((200, 1, 8, 8), np.float32), np.zeros(200, np.int64)
    x_test, t_test = np.zeros((1000, 1, 8, 8), np.float32), np.zeros(1000, np.int64)
    _, history = _classify.train_classifier(args, model, (x, t), (x_test, t_test), "acc")
    assert history[-1]["train_acc"] == 1.0 and history[-1]["test_acc"] == 1.0
