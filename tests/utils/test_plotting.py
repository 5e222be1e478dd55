"""lezero.utils.plot_history: training curves from a history, written as a PNG."""
import math
import subprocess
import sys

import numpy as np
import pytest

import lezero as lz
from lezero.utils.plotting import history_series

HISTORY = [{"loss": 2.0, "train_acc": 0.4, "test_acc": 0.35, "seconds": 1.5},
           {"loss": 1.2, "train_acc": 0.7, "test_acc": 0.66, "seconds": 1.4},
           {"loss": 0.8, "train_acc": 0.9, "test_acc": 0.81, "seconds": 1.4}]


def _curves(fig):
    return {line.get_label(): (list(line.get_xdata()), list(line.get_ydata()))
            for ax in fig.axes for line in ax.lines}


def test_writes_a_png_of_the_history(tmp_path):
    path = tmp_path / "history.png"
    fig = lz.utils.plot_history(HISTORY, str(path), title="run")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [p.name for p in tmp_path.iterdir()] == ["history.png"]      # no temp file left
    curves = _curves(fig)
    assert curves == {"loss": ([1, 2, 3], [2.0, 1.2, 0.8]),
                      "train_acc": ([1, 2, 3], [0.4, 0.7, 0.9]),
                      "test_acc": ([1, 2, 3], [0.35, 0.66, 0.81])}
    # losses on one panel, accuracies together on another; seconds is not a curve
    assert [[line.get_label() for line in ax.lines] for ax in fig.axes] == \
        [["loss"], ["train_acc", "test_acc"]]


def test_dict_of_lists_as_the_demo_keeps_it():
    fig = lz.utils.plot_history({"train_loss": [1.0, 0.5], "test_acc": [0.9, 0.95]})
    assert _curves(fig)["train_loss"][1] == [1.0, 0.5]
    assert _curves(fig)["test_acc"][1] == [0.9, 0.95]


def test_a_metric_missing_from_an_epoch_is_a_gap():
    series = history_series([{"loss": 1.0}, {"loss": 0.5, "val_loss": 0.7}])
    assert series["loss"] == [1.0, 0.5]
    assert math.isnan(series["val_loss"][0]) and series["val_loss"][1] == 0.7


def test_non_numeric_entries_are_left_out():
    series = history_series([{"loss": 1.0, "note": "warm-up", "ok": True}])
    assert series == {"loss": [1.0]}


def test_bad_histories_say_what_they_got():
    with pytest.raises(TypeError, match="plot_history: history must be a list of per-epoch "
                                        "dicts or a dict of lists, got ndarray"):
        lz.utils.plot_history(np.zeros(3))
    with pytest.raises(ValueError, match=r"no numeric metric to plot \(keys: \['seconds'\]\)"):
        lz.utils.plot_history([{"seconds": 1.0}])


def test_a_missing_folder_names_the_users_path(tmp_path):
    target = tmp_path / "nope" / "h.png"
    with pytest.raises(FileNotFoundError, match="plot_history: cannot write .*h.png"):
        lz.utils.plot_history(HISTORY, str(target))


def test_import_lezero_does_not_import_matplotlib():
    code = "import sys, lezero; print('matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "False"
