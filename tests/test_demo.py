"""``make demo`` trains a real CNN on real digits, saves, reloads and reports."""
import importlib
import os

import numpy as np
import pytest

import lezero.demo
from lezero.nn.models import LeNet5


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo")
    # Fewer epochs than the real run (20, which reaches 98.3%) to keep the test short.
    result = lezero.demo.main(["--epochs", "8", "--out", str(out), "--no-progress"])
    return out, result


def test_demo_reaches_high_test_accuracy(demo_run):
    _, r = demo_run
    assert r["accuracy"] >= 0.95
    assert r["history"]["test_acc"][-1] == r["accuracy"]
    assert len(r["history"]["train_loss"]) == 8
    # Learning happened: the loss fell by an order of magnitude from the first epoch.
    assert r["history"]["train_loss"][-1] < r["history"]["train_loss"][0] / 10


def test_demo_reloaded_model_scores_the_same(demo_run):
    out, r = demo_run
    assert r["reloaded_accuracy"] == r["accuracy"]
    assert r["model_path"] == os.path.join(str(out), lezero.demo.MODEL_FILE)
    fresh = LeNet5(input_size=8)
    fresh.load(r["model_path"])
    assert fresh.num_parameters() == r["parameters"] == 21386
    x = np.random.default_rng(0).random((4, 8, 8), dtype=np.float32)
    assert fresh(x).shape == (4, 10)


def test_demo_writes_a_png_curve(demo_run):
    out, r = demo_run
    with open(r["curve_path"], "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    assert os.path.getsize(r["curve_path"]) > 10_000
    leftovers = [n for n in os.listdir(out) if n.endswith(".tmp")]
    assert leftovers == []          # atomic writes leave no temporary files behind


def test_demo_report_lines(tmp_path, capsys):
    lezero.demo.print_report({"accuracy": 0.98, "reloaded_accuracy": 0.98,
                              "train_seconds": 3.0, "parameters": 21386, "epochs": 2,
                              "model_path": "m.npz", "curve_path": "c.png",
                              "history": {"train_loss": [0.5, 0.1]}}, 1438, 359)
    text = capsys.readouterr().out
    assert "test accuracy      98.00%  (target 97%: reached)" in text
    assert "reloaded accuracy  98.00%  (same as trained)" in text
    assert "21,386" in text and "m.npz" in text and "c.png" in text


@pytest.mark.parametrize("args", [["--epochs", "0"], ["--lr", "-1"], ["--threads", "0"]])
def test_demo_rejects_bad_arguments(args):
    with pytest.raises(SystemExit):
        lezero.demo.main(args)


def _small_run(epochs, show_progress=True):
    """``train`` on 128 digits: fast, and enough to see its progress output."""
    from lezero.data import DataLoader, TensorDataset
    from lezero.data.datasets import Digits
    digits = Digits(train=True)
    x, t = digits.data[:128], digits.targets[:128]
    loader = DataLoader(TensorDataset(x, t), batch_size=64, shuffle=True, seed=0)
    return lezero.demo.train(LeNet5(input_size=8), loader, (x, t), epochs, 1e-2,
                             show_progress=show_progress)


def test_demo_into_a_log_prints_a_plain_line_per_epoch(capsys):
    """Off a terminal (here stdout and stderr are captured): no bar, no carriage return,
    one line per epoch but the last (the report gives that one)."""
    history = _small_run(3)
    out, err = capsys.readouterr()
    assert "\r" not in out + err and "\x1b" not in out + err, repr(err[-300:])
    lines = out.splitlines()
    assert [line.split(":")[0] for line in lines] == ["epoch 1/3", "epoch 2/3"], out
    assert f"loss {history['train_loss'][1]:.4g}" in lines[1]
    assert f"test_acc {history['test_acc'][0]:.4g}" in lines[0]


def test_demo_no_progress_prints_nothing(capsys):
    _small_run(2, show_progress=False)
    out, err = capsys.readouterr()
    assert out == "" and err == ""


def test_epoch_progress_draws_a_bar_on_a_terminal(capsys, monkeypatch):
    bars = importlib.import_module("lezero.data.progress")   # lezero.data.progress is the function
    monkeypatch.setattr(bars, "on_terminal", lambda stream=None: True)
    progress = bars.EpochProgress(0, 2, 2)
    for epoch in progress:
        progress.show({"loss": 1.0 / (epoch + 1)})
    out, err = capsys.readouterr()
    assert out == "" and "\r" in err and "2/2" in err and "loss 0.5" in err, repr(err)


def test_record_saves_the_report_under_its_command_and_date(monkeypatch, capsys):
    import re
    import sys
    import types
    saved = []
    fake = types.ModuleType("doc_figures")               # the real one writes into docs/
    fake.record = lambda name, text: saved.append((name, text))
    monkeypatch.setitem(sys.modules, "doc_figures", fake)
    monkeypatch.setattr(sys, "path", list(sys.path))
    lezero.demo.record_report(["LeZero demo: ...", "  test accuracy      98.33%"],
                              ["--epochs", "2"])
    [(name, text)] = saved
    head = text.splitlines()[0]
    assert name == "demo" and "`python -m lezero.demo --epochs 2`" in head
    assert re.search(r"\(20\d\d-\d\d-\d\d, ", head) and "98.33%" in text
    assert "recorded as docs/figures/demo.md" in capsys.readouterr().out
