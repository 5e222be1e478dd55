"""The recording mode of lezero.testing and the operator check table derived from it."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import lezero as lz
import lezero.functions as F
from lezero.functions.registry import operators
from lezero.testing import check_gradient, check_table, check_torch, recording

ROOT = Path(__file__).resolve().parents[2]


def test_outermost_operators_only_and_factory_wrappers_told_apart():
    x = lz.Variable(np.full((2, 3), 0.5))
    assert recording.operators_called(lambda v: F.tanh(v) * 2 + v.sum(), x) == \
        ["tanh", "mul", "sum", "add"]
    # exp and sin share one factory-made wrapper code; the closure tells them apart
    assert recording.operators_called(lambda v: F.exp(v) + F.sin(v), x) == ["exp", "sin", "add"]
    # normalize calls norm, clip and div inside: only normalize is credited
    assert recording.operators_called(F.normalize, x) == ["normalize"]


def test_passing_checks_are_logged_per_kind_with_their_test(tmp_path, monkeypatch):
    monkeypatch.setenv(recording.ENV, str(tmp_path))
    monkeypatch.setattr(recording, "_seen", {})
    x = np.linspace(-1, 1, 6).reshape(2, 3)
    check_gradient(lambda v: F.tanh(v), x)
    check_torch(lambda v: F.sigmoid(v), __import__("torch").sigmoid, x.astype(np.float32))
    check_torch(lambda v: F.floor(v), __import__("torch").floor, x.astype(np.float32),
                grad=False)
    log = recording.load(tmp_path)
    assert list(log["gradient"]) == ["tanh"] and list(log["torch"]) == ["sigmoid"]
    assert list(log["torch_forward"]) == ["floor"] and log["double"] == {}
    assert log["gradient"]["tanh"].endswith("test_passing_checks_are_logged_per_kind_with_their_test")
    assert [p.name for p in tmp_path.iterdir()] == [f"checks-{os.getpid()}.json"]


def test_a_failing_check_logs_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv(recording.ENV, str(tmp_path))
    monkeypatch.setattr(recording, "_seen", {})

    class WrongGrad(lz.Function):
        def forward(self, x):
            return np.tanh(x)

        def backward(self, gy):
            return gy                   # the true gradient is gy * (1 - y**2)

    with pytest.raises(AssertionError):
        check_gradient(lambda v: F.exp(WrongGrad()(v)), np.full(3, 0.7))
    assert not tmp_path.exists() or list(tmp_path.iterdir()) == []


def test_without_the_variable_nothing_is_written(tmp_path, monkeypatch):
    monkeypatch.delenv(recording.ENV, raising=False)
    monkeypatch.setattr(recording, "_seen", {})
    check_gradient(lambda v: F.tanh(v), np.full(3, 0.2))
    assert recording._seen == {}


def _log(**kinds):
    return {k: {op: "t" for op in kinds.get(k, ())} for k in recording.KINDS}


def test_cells_say_check_reason_or_missing(monkeypatch):
    ops = {op.name: op for op in operators()}
    nondiff = next(op for op in ops.values() if not op.differentiable)
    log = _log(gradient=["tanh"], torch=["tanh"], torch_forward=[nondiff.name, "exp"])
    assert check_table.cell(ops["tanh"], "gradient", log) == ("check", "yes")
    assert check_table.cell(ops["tanh"], "double", log) == ("missing", "**MISSING**")
    assert check_table.cell(nondiff, "gradient", log) == ("reason", "no: not differentiable")
    assert check_table.cell(nondiff, "torch", log) == ("check", "yes (forward)")
    assert check_table.cell(ops["exp"], "torch", log) == ("missing", "forward only")
    monkeypatch.setitem(check_table.REASONS, "tanh", {"double": "a stated reason"})
    assert check_table.cell(ops["tanh"], "double", log) == ("reason", "no: a stated reason")


def test_strict_fails_on_an_unexplained_gap(tmp_path):
    log = tmp_path / "log"
    log.mkdir()
    (log / "checks-1.json").write_text(json.dumps({"gradient": {"tanh": "t"}}))
    cmd = [sys.executable, "-m", "lezero.functions", "--coverage", "--from", str(log)]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    loose = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    assert loose.returncode == 0 and "| `tanh` | math | yes |" in loose.stdout
    strict = subprocess.run(cmd + ["--strict"], capture_output=True, text=True, env=env, cwd=ROOT)
    assert strict.returncode == 1
    assert "operator without a check or a reason: tanh: double" in strict.stderr


def test_a_reason_for_a_recorded_check_is_stale(monkeypatch):
    monkeypatch.setitem(check_table.REASONS, "tanh", {"double": "not yet"})
    assert "tanh: double" in check_table.stale(_log(double=["tanh"]))
    assert "tanh: double" not in check_table.stale(_log(gradient=["tanh"]))


def test_the_table_replaces_only_its_own_block(tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text("# Title\n\nbefore\n\n## Later section\n\nafter\n")
    check_table.write_into(str(doc), f"{check_table.START}\nv1\n{check_table.END}")
    check_table.write_into(str(doc), f"{check_table.START}\nv2\n{check_table.END}")
    text = doc.read_text()
    assert "v1" not in text and text.count("v2") == 1
    assert text.startswith("# Title\n\nbefore") and "## Later section\n\nafter" in text


def test_reasons_name_registered_operators_and_columns():
    names = {op.name for op in operators()}
    columns = {c for c, _ in check_table.COLUMNS}
    for op, reasons in check_table.REASONS.items():
        assert op in names, f"REASONS names {op!r}, which is not a registered operator"
        assert set(reasons) <= columns and all(r.strip() for r in reasons.values())


def test_committed_table_lists_every_operator_with_a_check_or_a_reason():
    """docs/testing.md's generated table covers every registered operator, no MISSING cell.
    When this fails after adding operators: `python -m lezero.functions --coverage
    --markdown docs/testing.md` regenerates it from a run of the operator tests."""
    text = (ROOT / "docs" / "testing.md").read_text(encoding="utf-8")
    block = text.split(check_table.START, 1)[1].split(check_table.END, 1)[0]
    rows = dict(re.findall(r"^\| `([^`]+)` \| \w+ \| (.*) \|$", block, re.M))
    missing = sorted({op.name for op in operators()} - set(rows))
    assert not missing, f"operators absent from the check table: {missing}"
    gaps = [name for name, cells in rows.items()
            if any(c.strip() in ("**MISSING**", "forward only") for c in cells.split(" | "))]
    assert not gaps, f"operators with a check missing and no reason: {gaps}"


def test_main_writes_the_block_into_a_file_and_finds_the_operator_tests(tmp_path, capsys):
    log = tmp_path / "log"
    log.mkdir()
    (log / "checks-1.json").write_text(json.dumps({"gradient": {"tanh": "t"},
                                                   "torch": {"tanh": "t"}}))
    doc = tmp_path / "testing.md"
    doc.write_text("# Testing\n")
    assert check_table.main(["--from", str(log), "--markdown", str(doc)]) == 0
    text = doc.read_text()
    assert text.startswith("# Testing\n\n" + check_table.START)
    assert "| `tanh` | math | yes | yes | **MISSING** |" in text
    assert check_table.main(["--from", str(log), "--strict", "--markdown", str(doc)]) == 1
    assert "operator without a check or a reason: tanh: double" in capsys.readouterr().err
    files = check_table.operator_test_files(str(ROOT / "tests"))
    assert str(ROOT / "tests" / "functions" / "test_forward_parity.py") in files
