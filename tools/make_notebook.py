"""Build and execute a notebook from a readable percent-format script.

    python tools/make_notebook.py notebooks/src/01_core.py      # -> notebooks/01_core.ipynb

Cells are separated by ``# %%`` lines; ``# %% [markdown]`` starts a Markdown cell whose
lines are written as ``# text``.  The notebook is executed (outputs and plots kept) and
written atomically, so the committed .ipynb always shows a real run.
"""
import os
import sys
import tempfile

import nbformat
from nbclient import NotebookClient


def parse(source):
    """Split percent-format text into (kind, text) cells."""
    cells, kind, lines = [], None, []

    def flush():
        text = "\n".join(lines).strip("\n")
        if kind is not None and text.strip():
            cells.append((kind, text))

    for line in source.splitlines():
        if line.startswith("# %%"):
            flush()
            kind = "markdown" if "[markdown]" in line else "code"
            lines = []
        elif kind == "markdown":
            lines.append(line[2:] if line.startswith("# ") else line.lstrip("#"))
        elif kind is not None:
            lines.append(line)
    flush()
    return cells


def build(src_path, out_path=None, timeout=600):
    """Execute the script's cells as a notebook and write it next to notebooks/src/."""
    with open(src_path, encoding="utf-8") as f:
        cells = parse(f.read())
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nb.cells = [nbformat.v4.new_markdown_cell(t) if k == "markdown" else
                nbformat.v4.new_code_cell(t) for k, t in cells]
    root = os.path.dirname(os.path.dirname(os.path.abspath(src_path)))
    NotebookClient(nb, timeout=timeout, kernel_name="python3",
                   resources={"metadata": {"path": root}}).execute()
    out_path = out_path or os.path.join(root, os.path.basename(src_path)[:-3] + ".ipynb")
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(out_path), suffix=".ipynb")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        nbformat.write(nb, f)
    os.chmod(tmp, 0o644)
    os.replace(tmp, out_path)
    return out_path


if __name__ == "__main__":
    for path in sys.argv[1:]:
        print("wrote", build(path))
