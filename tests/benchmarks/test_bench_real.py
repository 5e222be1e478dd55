"""benchmarks/bench_real.py kept from rotting: one tiny row runs end to end in --quick mode
(no timing is asserted), and the command line picks rows and shapes or says what is
wrong.  (The real shapes take minutes: `python benchmarks/bench_real.py`.)"""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import bench_real as B  # noqa: E402


def test_a_tiny_row_runs_and_prints_its_ratio_and_targets():
    out = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "bench_real.py"),
                          "mlp", "--quick", "--shape", "tiny"], capture_output=True,
                         text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert "2 threads each" in lines[0] and "no environment variable set" in lines[0]
    row = lines[-1].split()
    assert row[0] == "mlp" and row[-1] in ("ok", "MISS")
    assert float(row[-4]) > 0 and row[-3:-1] == ["1.2", "1"]      # ratio, must, aim


def test_every_row_has_three_shapes_and_distinct_keys():
    keys = [r.key for r in B.ROWS]
    assert len(keys) == len(set(keys)) == 19
    for row in B.ROWS:
        first, second, tiny = row.shapes
        assert first != second and row.aim <= row.must, row.key


def test_rows_are_chosen_by_words_and_a_bad_word_is_named():
    assert [r.key for r in B.choose(["int8"])] == ["int8_vs_float", "int8_vs_torch"]
    with pytest.raises(SystemExit, match="no row matches"):
        B.choose(["nothing"])


def test_command_line():
    assert B.parse(["bert", "--quick"]) == (["bert"], ["first", "second"], True, False)
    assert B.parse(["--shape", "second", "--list"]) == ([], ["second"], False, True)
    with pytest.raises(SystemExit, match="--shape takes one of"):
        B.parse(["--shape", "huge"])
    with pytest.raises(SystemExit, match="unknown option"):
        B.parse(["--fast"])


def test_shape_text():
    assert B.shape_text({"batch": 8, "size": 224}) == "b8 224x224"
    assert B.shape_text({"batch": 2, "seq": 128, "new": 32}) == "b2 s128 +32"


def test_list_prints_the_rows(capsys):
    assert B.main(["--list", "gpt2"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in out] == ["gpt2_train", "gpt2_generate"]
