"""benchmarks/_record.py: ``--record`` saves what a benchmark printed, under a header that
names the command (with its BENCH_* settings) and the date, as a figures block; the
figures list that `make figures` runs names only scripts that can record."""
import importlib.util
import os
import re
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import _record  # noqa: E402
import doc_figures  # noqa: E402

SCRIPT = os.path.join(ROOT, "benchmarks", "bench_x.py")


def test_the_flag_is_taken_out_of_the_arguments_with_its_optional_name():
    assert _record.pop_record_flag([SCRIPT, "--rounds", "3"]) == (None, [SCRIPT, "--rounds", "3"])
    assert _record.pop_record_flag([SCRIPT, "--record"]) == ("bench_x", [SCRIPT])
    assert _record.pop_record_flag([SCRIPT, "--record", "bench_x_1thread", "--table"]) == \
        ("bench_x_1thread", [SCRIPT, "--table"])
    assert _record.pop_record_flag([SCRIPT, "--record", "--table"]) == \
        ("bench_x", [SCRIPT, "--table"])


def test_the_header_names_the_command_with_its_settings_and_the_date(monkeypatch):
    monkeypatch.setenv("BENCH_THREADS", "1")
    monkeypatch.setenv("BENCH_CLOCK", "cpu")
    monkeypatch.setenv("OTHER", "x")
    assert _record.command_line([SCRIPT, "--table"]) == \
        "BENCH_CLOCK=cpu BENCH_THREADS=1 python benchmarks/bench_x.py --table"
    head = _record.header([SCRIPT], load=2.5, when="2026-12-06")
    assert head.startswith("Last output of `BENCH_CLOCK=cpu BENCH_THREADS=1 python "
                           "benchmarks/bench_x.py` (2026-12-06, ")
    assert "load average 2.5" in head


@pytest.fixture
def site(tmp_path, monkeypatch):
    (tmp_path / "figures").mkdir()
    page = tmp_path / "page.md"
    page.write_text("# X\n<!-- figures:bench_x:start -->\nold 9.9x\n<!-- figures:bench_x:end -->\n")
    monkeypatch.setattr(doc_figures, "FIGURES", str(tmp_path / "figures"))
    monkeypatch.setattr(doc_figures, "ROOT", str(tmp_path))
    monkeypatch.setattr(doc_figures, "pages", lambda: [str(page)])
    return page


def test_run_main_records_what_main_printed_and_only_with_the_flag(site, monkeypatch, capsys):
    def main():
        print(f"ratio 1.36 ({sys.argv[1:]})")
        return 7

    monkeypatch.setattr(sys, "argv", [SCRIPT, "--quick"])
    assert _record.run_main(main) == 7
    assert "old 9.9x" in site.read_text()            # no flag: nothing recorded
    monkeypatch.setattr(sys, "argv", [SCRIPT, "--record", "--quick"])
    assert _record.run_main(main) == 7
    out = capsys.readouterr().out
    assert "ratio 1.36 (['--quick'])" in out and "recorded as docs/figures/bench_x.md" in out
    text = site.read_text()
    assert "old 9.9x" not in text
    assert re.search(r"Last output of `python benchmarks/bench_x.py --quick` \(\d{4}-\d\d-\d\d, ",
                     text)
    assert "```text\nratio 1.36 (['--quick'])\n```\n<!-- figures:bench_x:end -->" in text
    assert doc_figures.sync(check=True) == []


def test_a_failing_main_records_nothing(site, monkeypatch):
    def main():
        print("half a table")
        raise RuntimeError("broken")

    monkeypatch.setattr(sys, "argv", [SCRIPT, "--record"])
    with pytest.raises(RuntimeError):
        _record.run_main(main)
    assert "old 9.9x" in site.read_text() and sys.stdout is not None


def test_the_quantize_example_records_its_result_table(site, monkeypatch):
    """examples/quantize_digits.py's table (its training is not run here)."""
    spec = importlib.util.spec_from_file_location(
        "quantize_digits_under_test", os.path.join(ROOT, "examples", "quantize_digits.py"))
    module = importlib.util.module_from_spec(spec)
    monkeypatch.syspath_prepend(os.path.join(ROOT, "examples"))
    for name in ("_common", "_quant"):     # the examples' helpers, not the benchmarks'
        monkeypatch.delitem(sys.modules, name, raising=False)
    spec.loader.exec_module(module)
    for name in ("_common", "_quant"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    page = site.read_text().replace("bench_x", "quantize_digits")
    site.write_text(page)

    class Args:
        seed, epochs, qat_epochs, observer = 0, 12, 3, "minmax"
    monkeypatch.setattr(sys, "argv", ["examples/quantize_digits.py", "--record"])
    module.record_results(Args, {"float_acc": 0.9666, "ptq_acc": 0.9638, "qat_acc": 0.9694,
                                 "float_bytes": 85504, "int8_bytes": 23040,
                                 "size_ratio": 0.2695})
    text = site.read_text()
    assert "Last output of `python examples/quantize_digits.py` (" in text
    assert "| float32 | 96.66% |  |" in text
    assert "| PTQ int8 | 96.38% | -0.28 |" in text and "| QAT int8 | 96.94% | +0.28 |" in text
    assert "(0.270x)" in text


def figures_commands():
    with open(os.path.join(ROOT, "tools", "figures_scripts.txt"), encoding="utf-8") as f:
        return [line.strip() for line in f if line.strip() and not line.startswith("#")]


def script_of(cmd):
    """The file a listed command runs: its ``.py`` word, or the module after ``-m``."""
    words = cmd.split()
    if "-m" in words:
        return words[words.index("-m") + 1].replace(".", "/") + ".py"
    return next(w for w in words if w.endswith(".py"))


def test_every_listed_command_runs_a_script_that_records():
    commands = figures_commands()
    assert len(commands) >= 15
    for cmd in commands:
        path = script_of(cmd)
        assert "--record" in cmd.split(), cmd
        with open(os.path.join(ROOT, path), encoding="utf-8") as f:
            source = f.read()
        assert "run_main(" in source or "record(" in source, path


def test_every_block_on_the_pages_has_a_command_that_records_it():
    """A block whose script `make figures` does not run would keep a stale output."""
    listed = set()
    for cmd in figures_commands():
        words = cmd.split()
        i = words.index("--record")
        named = i + 1 < len(words) and not words[i + 1].startswith("-")
        script = script_of(cmd)
        listed.add(words[i + 1] if named else os.path.splitext(os.path.basename(script))[0])
    for page in doc_figures.pages():
        with open(page, encoding="utf-8") as f:
            names = {m.group(2) for m in doc_figures.BLOCK.finditer(f.read())}
        assert names <= listed, (os.path.basename(page), names - listed)
