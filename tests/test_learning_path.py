"""Every step file runs on its own; every notebook executes without error."""
import glob
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STEPS = sorted(glob.glob(os.path.join(ROOT, "steps", "step*.py")))
NOTEBOOKS = sorted(glob.glob(os.path.join(ROOT, "notebooks", "*.ipynb")))


@pytest.mark.parametrize("path", STEPS, ids=os.path.basename)
def test_step_runs_alone(path, tmp_path):
    env = dict(os.environ, MPLBACKEND="Agg", OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, path], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert proc.stdout.strip(), "a step prints what it computed"
    left = sorted(os.listdir(tmp_path))
    assert not left, f"a step writes files only into a temporary folder; it left {left}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=os.path.basename)
def test_notebook_executes(path):
    nbformat = pytest.importorskip("nbformat")
    from nbclient import NotebookClient
    nb = nbformat.read(path, as_version=4)
    assert any(c.cell_type == "code" and c.get("outputs") for c in nb.cells), \
        "committed notebooks keep their executed outputs"
    NotebookClient(nb, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": ROOT}}).execute()


SOURCES = sorted(glob.glob(os.path.join(ROOT, "notebooks", "src", "*.py")))


def _notebook_of(src):
    name = os.path.splitext(os.path.basename(src))[0] + ".ipynb"
    return os.path.join(ROOT, "notebooks", name)


def test_every_notebook_source_has_its_notebook_and_back():
    built = {os.path.basename(_notebook_of(s)) for s in SOURCES}
    assert len(SOURCES) >= 20 and built == {os.path.basename(p) for p in NOTEBOOKS}


@pytest.mark.parametrize("src", SOURCES, ids=os.path.basename)
def test_the_executed_notebook_holds_its_current_source(src):
    """test_notebook_executes re-executes the committed .ipynb; that runs the source only
    while the notebook's cells are the source's (rebuild it with
    `python tools/make_notebook.py notebooks/src/NAME.py` after editing the source)."""
    nbformat = pytest.importorskip("nbformat")
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    from make_notebook import parse
    with open(src, encoding="utf-8") as f:
        cells = parse(f.read())
    nb = nbformat.read(_notebook_of(src), as_version=4)
    got = [(c.cell_type, c.source) for c in nb.cells]
    assert got == cells, (f"{os.path.relpath(_notebook_of(src), ROOT)} differs from "
                          f"{os.path.relpath(src, ROOT)}: rebuild it with tools/make_notebook.py")
