"""Figures in docs/ and the README are written by the script that measures them.

A measuring script ends with ``record(NAME, text)``: ``text`` (a header line naming the
command and the date, then the table or list) is saved as ``docs/figures/NAME.md``, the
script's last output, and copied into every block of the pages marked

    <!-- figures:NAME:start -->
    ...
    <!-- figures:NAME:end -->

so no figure in such a block is typed by hand.  ``python tools/doc_figures.py`` copies
every saved output into its blocks again; ``--check`` only lists the blocks that differ
from their script's last output (``make figures-check`` and tests/test_doc_figures.py).
"""
import argparse
import glob
import os
import re
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIGURES = os.path.join(ROOT, "docs", "figures")
NAME = re.compile(r"^[a-z0-9_]+$")
BLOCK = re.compile(r"(<!-- figures:([a-z0-9_]+):start -->\n)(.*?)(<!-- figures:\2:end -->)", re.S)


def pages():
    """The pages that may hold generated blocks: docs/*.md and the README."""
    return sorted(glob.glob(os.path.join(ROOT, "docs", "*.md"))) + [os.path.join(ROOT, "README.md")]


def output_path(name):
    if not NAME.match(name):
        raise ValueError(f"a figures name is lower case letters, digits and _, got {name!r}")
    return os.path.join(FIGURES, name + ".md")


def _write_atomically(path, text):
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
    try:
        os.chmod(tmp, 0o644)                  # mkstemp makes 0600; pages are read by all
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def _filled(page_text, missing):
    """``page_text`` with every block replaced by its saved output (names without one
    are added to ``missing`` and left as they are)."""
    def fill(m):
        path = output_path(m.group(2))
        if not os.path.exists(path):
            missing.append(m.group(2))
            return m.group(0)
        with open(path, encoding="utf-8") as f:
            body = f.read().rstrip("\n") + "\n"
        return m.group(1) + body + m.group(4)
    return BLOCK.sub(fill, page_text)


def sync(check=False):
    """Copy each saved output into its blocks (or, with ``check``, only compare).
    Returns the problems found: ``page: block NAME ...`` lines."""
    problems = []
    for page in pages():
        with open(page, encoding="utf-8") as f:
            old = f.read()
        missing = []
        new = _filled(old, missing)
        rel = os.path.relpath(page, ROOT)
        problems += [f"{rel}: block {name} has no docs/figures/{name}.md (run its script)"
                     for name in missing]
        if new != old:
            if check:
                changed = [m.group(2) for m in BLOCK.finditer(old)
                           if _filled(m.group(0), []) != m.group(0)]
                problems += [f"{rel}: block {name} differs from docs/figures/{name}.md"
                             for name in changed]
            else:
                _write_atomically(page, new)
    return problems


def record(name, text):
    """Save ``text`` as the last output of the script measuring ``name`` and copy it
    into the pages' blocks.  The first line must name the command and a date."""
    head = text.lstrip().splitlines()[0] if text.strip() else ""
    if not re.search(r"\d{4}-\d{2}-\d{2}", head) or "`" not in head:
        raise ValueError(f"figures {name!r}: the first line must name the command (in "
                         f"backticks) and the date (YYYY-MM-DD), got {head!r}")
    os.makedirs(FIGURES, exist_ok=True)
    _write_atomically(output_path(name), text.rstrip("\n") + "\n")
    return sync()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true",
                   help="only list the blocks that differ from their script's last output")
    args = p.parse_args(argv)
    problems = sync(check=args.check)
    for line in problems:
        print(line)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
