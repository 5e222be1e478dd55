"""``make demo`` trains a real CNN on real digits, saves, reloads and reports."""
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
