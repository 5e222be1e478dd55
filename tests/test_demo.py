"""The demo trains a real model on real data and reports what it achieved."""
import lezero.demo


def test_demo_reaches_high_accuracy_quickly(tmp_path, capsys):
    acc = lezero.demo.main(["--epochs", "8", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert acc > 0.93
    assert "test accuracy" in out and "reloaded accuracy" in out
