"""benchmarks/ab_policy.py kept from rotting: a tiny row runs with a setting and prints
the three times and ratios; no setting, or a name the policy lacks, is refused by name."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "benchmarks", "ab_policy.py")


def _run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)


def test_a_tiny_row_runs_as_is_and_with_the_setting():
    out = _run("mlp", "cheap_min_part_items=1<<20", "--quick", "--shape", "tiny")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert "'cheap_min_part_items': 1048576" in lines[0]
    row = lines[-1]
    assert row.startswith("mlp") and "as is/ref" in row and "with/as is" in row
    assert float(row.rsplit(" ", 1)[1]) > 0


def test_no_setting_or_an_unknown_one_is_refused():
    out = _run("mlp", "--quick", "--shape", "tiny")
    assert out.returncode != 0 and "name at least one policy setting" in out.stderr
    out = _run("mlp", "no_such_entry=3", "--quick", "--shape", "tiny")
    assert out.returncode != 0 and "no_such_entry" in out.stderr


def test_a_module_attribute_is_patched_for_the_with_rounds_only():
    """``module:attribute=value`` replaces the attribute in the "with" rounds: a linear
    layer whose product raises there fails the run; an unknown attribute is refused."""
    out = _run("mlp", "lezero.functions.conv.im2col:PER_SAMPLE_MACS=0", "--quick", "--shape",
               "tiny")
    assert out.returncode == 0, out.stderr
    assert "patched: ['lezero.functions.conv.im2col:PER_SAMPLE_MACS']" in out.stdout
    out = _run("mlp", "lezero.functions:linear=None", "--quick", "--shape", "tiny")
    assert out.returncode != 0 and "NoneType" in out.stderr
    out = _run("mlp", "lezero.runtime.blas:no_such_name=1", "--quick", "--shape", "tiny")
    assert out.returncode != 0 and "no_such_name" in out.stderr
