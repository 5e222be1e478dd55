"""The README's tour runs as written."""
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_readme_tour_runs(tmp_path, monkeypatch):
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        blocks = re.findall(r"```python\n(.*?)```", f.read(), re.S)
    tour = next(b for b in blocks if "nn.Sequential" in b)
    monkeypatch.chdir(tmp_path)
    scope = {}
    exec(compile(tour, "README.md", "exec"), scope)
    assert (tmp_path / "digits.safetensors").exists()
    assert scope["g2"].item() != 0 and float(scope["loss"].item()) < 2.3
