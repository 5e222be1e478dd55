"""tools/zoo_table.py builds docs/model_zoo.md's table from the examples' summary.json
files, and every figure in that page comes with the command that measured it."""
import json
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import zoo_table  # noqa: E402

DOC = os.path.join(ROOT, "docs", "model_zoo.md")
# a measured quantity: a number with a unit of time, rate, ratio, memory or a percentage
FIGURE = re.compile(r"(?<![\w.])\d[\d,]*(\.\d+)?\s?(%|ms\b|us\b|s\b|x\b|GFLOP/s|MiB|GiB|"
                    r"epochs/s|steps/s|nats)")
COMMAND = re.compile(r"`(python|make|pytest|BENCH_\w+=\S+ python|[A-Z_]+=\S+ python)[^`]*`")


def _blocks(text):
    """Paragraphs, list items and table rows of a markdown text, code blocks left out."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    for para in re.split(r"\n\s*\n", text):
        lines = para.strip().splitlines()
        if lines and lines[0].startswith("|"):
            yield from lines
        else:
            yield from re.split(r"\n(?=\s*[-*] |\s*\d+\. )", para)


def test_every_figure_in_the_zoo_page_has_its_command():
    with open(DOC, encoding="utf-8") as f:
        text = f.read()
    bare = [b.strip()[:120] for b in _blocks(text) if FIGURE.search(b) and not COMMAND.search(b)]
    assert not bare, "figures without the command that measured them:\n" + "\n".join(bare)


def test_the_figure_check_catches_a_bare_figure():
    blocks = list(_blocks("intro\n\nThe model reached 97.2% in 18 s.\n\n"
                          "| a | 3.1 ms | `python x.py` |"))
    flagged = [b for b in blocks if FIGURE.search(b) and not COMMAND.search(b)]
    assert flagged == ["The model reached 97.2% in 18 s."]


def test_generated_rows_carry_command_and_date():
    with open(DOC, encoding="utf-8") as f:
        text = f.read()
    table = text.split(zoo_table.START, 1)[1].split(zoo_table.END, 1)[0]
    for row in [line for line in table.splitlines() if line.startswith("| ")][1:]:
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert re.fullmatch(r"\d{4}-\d\d-\d\d", cells[6]), row
        assert cells[7].startswith("`python examples/"), row


def test_zoo_runs_are_read_without_importing():
    runs = zoo_table.example_runs(os.path.join(ROOT, "examples", "train_vision_zoo.py"))
    assert len(runs) == 12 and ["--model", "swin_t"] in runs
    assert zoo_table.example_runs(os.path.join(ROOT, "examples", "train_mlp.py")) == [[]]
    plans = zoo_table.planned_runs("/tmp/o", only="vision_zoo-vit", quick=True)
    assert len(plans) == 1
    name, cmd, out = plans[0]
    assert name == "train_vision_zoo-vit_b_16" and out == "/tmp/o/train_vision_zoo-vit_b_16"
    assert cmd[1:] == ["examples/train_vision_zoo.py", "--model", "vit_b_16", "--epochs", "1",
                       "--out", out]


def test_bad_zoo_runs_literal(tmp_path):
    path = tmp_path / "train_x.py"
    path.write_text("ZOO_RUNS = ['--model']\n")
    with pytest.raises(ValueError, match="ZOO_RUNS must be a list of argument lists"):
        zoo_table.example_runs(str(path))


def _summary(folder, **kw):
    os.makedirs(folder, exist_ok=True)
    base = {"model": "m", "task": "image classification", "data": "digits", "metric": "test_acc",
            "value": 0.9512, "seconds": 12.3, "smoke": False, "date": "2026-12-03",
            "machine": "x86_64", "parameters": 1234,
            "command": f"python {ROOT}/examples/train_m.py --epochs 2 --out /x/y"}
    base.update(kw)
    with open(os.path.join(folder, "summary.json"), "w") as f:
        json.dump(base, f)


def test_table_from_summaries_keeps_the_prose(tmp_path):
    _summary(tmp_path / "a")
    _summary(tmp_path / "b" / "inner", model="gpt", task="language model", metric="val_loss",
             value=2.25, parameters=None, command="python examples/train_gpt.py --out=z")
    _summary(tmp_path / "c", smoke=True)                 # smoke runs are no results
    rows = zoo_table.collect(str(tmp_path))
    assert [r["model"] for r in rows] == ["m", "gpt"]
    table = zoo_table.render(rows)
    assert "| m | image classification | digits | 1,234 | test_acc 95.1% | 12 s | 2026-12-03 " \
           "| `python examples/train_m.py --epochs 2` |" in table
    assert "| gpt | language model | digits | n/a | val_loss 2.25 |" in table
    doc = f"intro\n{zoo_table.START}\nold\n{zoo_table.END}\noutro\n"
    new = zoo_table.replace_table(doc, table)
    assert new.startswith("intro\n") and new.endswith("outro\n") and "old" not in new
    with pytest.raises(ValueError, match="markers"):
        zoo_table.replace_table("no markers", table)


def test_tool_runs_an_example_and_writes_the_table(tmp_path):
    doc = tmp_path / "zoo.md"
    doc.write_text(f"# zoo\n{zoo_table.START}\n{zoo_table.END}\n")
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "zoo_table.py"),
                           "--quick", "--only", "train_mlp", "--out-root", str(tmp_path / "runs"),
                           "--doc", str(doc), "--archive", str(tmp_path / "archive")], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    text = doc.read_text()
    assert "| mlp | image classification |" in text
    assert "`python examples/train_mlp.py --epochs 1`" in text
    with open(tmp_path / "archive" / "mlp.json") as f:       # the run is recorded
        assert json.load(f)["command"].split()[1:3] == ["examples/train_mlp.py", "--epochs"]


def test_a_fresh_run_replaces_the_recorded_run_of_the_same_command(tmp_path):
    _summary(tmp_path / "runs" / "a", value=0.97, date="2026-12-04")
    _summary(tmp_path / "runs" / "b", model="other", command="python examples/train_o.py")
    archive = tmp_path / "archive"
    archive.mkdir()
    old = {"model": "m", "task": "image classification", "data": "digits", "metric": "test_acc",
           "value": 0.5, "seconds": 1, "date": "2026-12-01",
           "command": "python examples/train_m.py --epochs 2"}
    (archive / "m.json").write_text(json.dumps(old))
    (archive / "kept.json").write_text(json.dumps(dict(old, model="kept",
                                                       command="python examples/train_k.py")))
    rows = zoo_table.collect(str(tmp_path / "runs"), str(archive))
    assert sorted((r["model"], r["value"]) for r in rows) == [
        ("kept", 0.5), ("m", 0.97), ("other", 0.9512)]
    written = zoo_table.archive_runs(str(tmp_path / "runs"), str(archive))
    assert sorted(os.path.basename(w) for w in written) == ["m.json", "other.json"]
    assert json.loads((archive / "m.json").read_text())["value"] == 0.97


def test_an_archived_run_keeps_the_command_without_its_local_out_folder(tmp_path):
    _summary(tmp_path / "runs" / "a", command=f"{sys.executable} "
             f"{os.path.join(zoo_table.ROOT, 'examples', 'train_m.py')} --epochs 2 "
             f"--out {tmp_path / 'runs' / 'a'}")
    zoo_table.archive_runs(str(tmp_path / "runs"), str(tmp_path / "archive"))
    saved = json.loads((tmp_path / "archive" / "m.json").read_text())
    assert saved["command"] == "python examples/train_m.py --epochs 2"


def test_every_recorded_run_is_in_the_table():
    rows = zoo_table.collect("/nonexistent", zoo_table.ARCHIVE)
    with open(DOC, encoding="utf-8") as f:
        table = f.read().split(zoo_table.START, 1)[1].split(zoo_table.END, 1)[0]
    assert zoo_table.render(rows) == table.lstrip("\n"), \
        "docs/model_zoo.md is stale: run `python tools/zoo_table.py --no-run`"
