"""benchmarks/profile_conv_layers.py kept from rotting: a small ResNet-18 run times its
convolutions on both sides and prints the shapes with their times."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "benchmarks", "profile_conv_layers.py")


def test_resnet18_layers_are_timed_on_both_sides():
    out = subprocess.run([sys.executable, SCRIPT, "resnet18", "1", "32", "--rounds", "1",
                          "--rows", "3"], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert lines[0].startswith("resnet18 b1 32x32, per forward pass: model LeZero")
    rows = lines[2:]
    assert len(rows) == 3
    for row in rows:                       # ((1, C, H, W), (O, C, kh, kw), stride, groups)
        assert row.startswith("((1, ") and row.count(" ms") == 2
        ours, theirs = (float(v) for v in row.split(")")[-1].split("ms")[:2])
        assert ours > 0 and theirs > 0
