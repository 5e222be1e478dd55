"""The README works for a newcomer as written: the tour runs and prints what it computed,
the commands it gives for running a step and an example run from a fresh checkout, and
every `make` target it names exists."""
import math
import os
import re
import shlex
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
    README = f.read()
BASH = "\n".join(re.findall(r"```bash\n(.*?)```", README, re.S))
# `.venv/bin/python steps/step07.py` or, after `source .venv/bin/activate`, `python ...`
RUN = re.compile(r"^(?:\.venv/bin/)?python ((?:steps|examples)/\S+\.py)([^#\n]*)", re.M)


def readme_runs():
    """(script, arguments) of every step or example the README's commands run."""
    return [(m.group(1), shlex.split(m.group(2))) for m in RUN.finditer(BASH)]


def test_readme_tour_runs(tmp_path, monkeypatch, capsys):
    blocks = re.findall(r"```python\n(.*?)```", README, re.S)
    tour = next(b for b in blocks if "nn.Sequential" in b)
    monkeypatch.chdir(tmp_path)
    scope = {}
    exec(compile(tour, "README.md", "exec"), scope)
    assert (tmp_path / "digits.safetensors").exists()
    assert scope["g2"].item() != 0 and float(scope["loss"].item()) < 2.3
    out = capsys.readouterr().out
    x = 2.0                                     # y = x^3 + x sin x: the tour prints its values
    dy = 3 * x ** 2 + math.sin(x) + x * math.cos(x)
    assert f"dy/dx = {dy:.4f}" in out, out
    assert "last batch loss" in out and "saved" in out, out


def test_readme_names_a_step_and_an_example_to_run():
    kinds = {script.split("/")[0] for script, _ in readme_runs()}
    assert kinds == {"steps", "examples"}, readme_runs()
    assert ".venv/bin/python steps/" in BASH and "source .venv/bin/activate" in BASH


@pytest.mark.parametrize("script,args", readme_runs(), ids=lambda v: str(v))
def test_a_first_run_from_the_readme_works(script, args, tmp_path):
    """Run as a newcomer would, from another folder so nothing lands in the checkout:
    the script exists, exits 0, prints, and writes only where its flags say."""
    path = os.path.join(ROOT, script)
    assert os.path.exists(path), f"README runs {script}, which does not exist"
    env = dict(os.environ, MPLBACKEND="Agg", OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               NUMBA_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, path, *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert proc.stdout.strip(), "what a newcomer runs first prints what it computed"
    if "--out" in args:
        out = tmp_path / args[args.index("--out") + 1]
        assert (out / "summary.json").exists() and (out / "history.png").exists()


def test_every_make_target_the_readme_names_exists():
    with open(os.path.join(ROOT, "Makefile"), encoding="utf-8") as f:
        targets = set(re.findall(r"^([\w-]+):", f.read(), re.M))
    named = set(re.findall(r"`make ([\w-]+)", README)) | set(re.findall(r"^make ([\w-]+)",
                                                                          BASH, re.M))
    assert {"demo", "test", "install", "notebooks", "jupyter"} <= named
    assert named <= targets, f"the README names make targets the Makefile lacks: " \
                             f"{sorted(named - targets)}"


def test_readme_points_inside_the_checkout():
    """Every relative link of the README resolves in a clone (no ../shared/...)."""
    links = re.findall(r"\]\(([^)#]+)\)", README)
    local = [link for link in links if not re.match(r"https?://", link)]
    assert "docs/architecture.md" in local
    missing = [link for link in local if not os.path.exists(os.path.join(ROOT, link))]
    assert not missing, f"README links outside the checkout or to nothing: {missing}"


def test_make_notebooks_installs_what_notebooks_need_and_no_torch():
    with open(os.path.join(ROOT, "setup.py"), encoding="utf-8") as f:
        setup = f.read()
    deps = re.search(r"NOTEBOOK_DEPS = \[(.*?)\]", setup, re.S).group(1)
    names = {re.split(r"[<>=\[]", d.strip().strip('"'))[0] for d in deps.split(",") if d.strip()}
    assert {"jupyterlab", "nbclient", "nbformat", "ipykernel", "matplotlib"} <= names
    assert not {"torch", "torchvision", "transformers"} & names
    assert '"notebooks": NOTEBOOK_DEPS' in setup
    with open(os.path.join(ROOT, "Makefile"), encoding="utf-8") as f:
        make = f.read()
    rule = re.search(r"^notebooks:.*?\n((?:\t.*\n)+)", make, re.M).group(1)
    assert "tools/make_notebook.py notebooks/src/*.py" in rule
    assert '.[notebooks' in make and re.search(r"^jupyter:.*\n\t.*jupyter lab", make, re.M)
