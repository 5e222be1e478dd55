"""Every figure in docs/*.md (and README.md) carries the command that measured it and
the date.

The rule (docs/testing.md, "Figures in docs/ carry their command"), applied to every
page in docs/, including pages written after this test, and to the README:

* A *figure* is a number followed by a percent sign, a unit of time (ns, us, µs, ms, s,
  min), a data rate (KB/s, MB/s, GB/s, GFLOP/s) or a ratio sign (``2.4x``, ``3×``; not
  ``3x3`` or ``1024 x 784``, which are shapes), in the page's prose, lists or tables.
* Code blocks (fenced or indented) and inline code spans are code, not figures: a setting or a shape
  is written as code (``timeout=600``), a measured result is not.
* A figure's *section* is the heading above it and the text down to the next heading
  (any level).  The section must name a command that a reader can run (``python ...``,
  ``make ...``, ``pytest ...``, ``mpiexec ...``, or the same behind ``VAR=value``
  settings), in backticks or as a line of a code block, and a date written
  ``YYYY-MM-DD``.  A generated block
  (``tools/zoo_table.py``'s table) passes because its header says both.

And a second rule (issue 38): a figure sits inside a generated block -- a
``<!-- figures:NAME:start -->`` block (tools/doc_figures.py: the measuring script's last
output) or an older generator's markers (the zoo table, onnx.md's coverage, testing.md's
operator checks, amp.md's cast policy) -- so no figure is typed by hand.  Pages in
``NOT_YET`` are being converted and say why; pages without figures pass.
"""
import glob
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# docs/ and the README, the first page a newcomer reads
PAGES = sorted(glob.glob(os.path.join(ROOT, "docs", "*.md"))) + [os.path.join(ROOT, "README.md")]

# (the upper end of a range, "46.8-54.8 ms", is a figure too)
FIGURE = re.compile(r"(?:(?<=\d-)|(?<![\w.\-/]))\d[\d,]*(?:\.\d+)?\s?"
                    r"(?:%|(?:ns|us|µs|ms|s|min|[KMG]B/s|[GT]FLOP/s)\b|(?:x|×)(?![\w×]|\s?\d))")
_RUN = r"(?:[A-Z][A-Z0-9_]*=\S+\s+)*(?:python|make|pytest|mpiexec)\b"
COMMAND = re.compile(rf"`{_RUN}[^`]*`")          # in prose: inside backticks
CODE_COMMAND = re.compile(rf"^\s*(?:\$\s*)?{_RUN}")  # in a code block: a line that runs one
DATE = re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b")
CODE_SPAN = re.compile(r"`[^`\n]*`")
# Pages whose figures are still being moved into generated blocks, and why.
NOT_YET = {
    "performance.md": ("the project's dated benchmark diary (the standards put the measurements "
                       "behind design choices here); its current tables are generated blocks"),
}
# Where a generated region starts (a line of its own) -> the line that ends it.
BLOCK_START = re.compile(r"^<!-- (?:(?P<name>[a-z0-9_-]+(?::[a-z0-9_]+)?):start\b"
                         r"|(?P<cast>cast policy table: generated)).*-->\s*$")
RULE = ("a page that states a measured figure (a number with %, a time unit, a rate or an "
        "'x' ratio) must name, in the same section (between two headings), the command "
        "that measured it in backticks (`python benchmarks/...`, `make ...`, `pytest ...`, "
        "`mpiexec ...`) and the date it was measured (YYYY-MM-DD); a setting or a shape "
        "is not a figure: write it as code (`timeout=600`). See docs/testing.md.")


def sections(text):
    """[(heading, prose lines, code lines)] per section; lines are (number, text)."""
    out, fenced = [("(top of the page)", [], [])], False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced or line.startswith(("    ", "\t")) and not line.lstrip().startswith(
                ("* ", "- ", "|")) and _indented_code(line):
            out[-1][2].append((number, line))
        elif line.startswith("#"):
            out.append((line.strip(), [], []))
        else:
            out[-1][1].append((number, line))
    return out


def _indented_code(line):
    """A line indented four spaces is code when it runs a command (list continuations
    are indented too, and stay prose)."""
    return bool(CODE_COMMAND.match(line))


def figures(line):
    """The figures a line states (code spans are not figures)."""
    return [m.group(0) for m in FIGURE.finditer(CODE_SPAN.sub(" ", line))]


def bare_figures(text):
    """['line N: figures -- section heading (missing: command, date)'] for every figure
    whose section lacks its command or its date."""
    found = []
    for heading, lines, code in sections(text):
        body = "\n".join([heading] + [line for _, line in lines])   # the heading counts too
        has = {"command": bool(COMMAND.search(body)
                               or any(CODE_COMMAND.match(line) for _, line in code)),
               "date": bool(DATE.search(body))}
        missing = [what for what, ok in has.items() if not ok]
        if not missing:
            continue
        for number, line in lines:
            if figures(line):
                found.append(f"line {number}: {', '.join(figures(line))} -- in "
                             f"'{heading[:60]}' (missing: {' and '.join(missing)})")
    return found


def outside_blocks(text):
    """``text`` with the lines of every generated region blanked (line numbers kept)."""
    out, end = [], None
    for line in text.splitlines():
        if end is None:
            m = BLOCK_START.match(line.strip())
            if m:
                end = ("<!-- end of cast policy table -->" if m.group("cast")
                       else f"<!-- {m.group('name')}:end -->")
            out.append("" if m else line)
        else:
            out.append("")
            if line.strip() == end:
                end = None
    return "\n".join(out)


def hand_typed_figures(text):
    """['line N: figures'] for every figure outside the generated regions."""
    return [f"line {number}: {', '.join(figures(line))}"
            for _, lines, _ in sections(outside_blocks(text))
            for number, line in lines if figures(line)]


@pytest.mark.parametrize("page", PAGES, ids=os.path.basename)
def test_every_figure_sits_in_a_generated_block(page):
    if os.path.basename(page) in NOT_YET:
        pytest.skip(NOT_YET[os.path.basename(page)])
    with open(page, encoding="utf-8") as f:
        loose = hand_typed_figures(f.read())
    assert not loose, (
        f"{os.path.relpath(page, ROOT)}: a figure is written by the script that measures "
        "it: put it in a <!-- figures:NAME:start --> block that the script records "
        "(tools/doc_figures.py, `make figures`), write a setting as code, or remove a "
        "measurement no command reproduces. Hand-typed figures:\n  " + "\n  ".join(loose))


def test_only_figures_outside_generated_blocks_are_hand_typed():
    page = ("# T\n\nTyped: 96.9% in 3 s.\n\n<!-- figures:bench_x:start -->\n"
            "Last output of `python x.py` (2026-12-06):\n\n| a | 1.36x |\n"
            "<!-- figures:bench_x:end -->\n\n<!-- zoo-table:start -->\n| m | 97.2% |\n"
            "<!-- zoo-table:end -->\n\n<!-- cast policy table: generated by x() -->\n"
            "| op | 2x |\n<!-- end of cast policy table -->\n\nA setting: `timeout 600 s`."
            "\nAfter it: 0.4 ms.\n")
    assert hand_typed_figures(page) == ["line 3: 96.9%, 3 s", "line 20: 0.4 ms"]
    # a marker quoted inside prose does not open a block
    assert hand_typed_figures("See `<!-- zoo-table:start -->` there: 2 s.\n") == [
        "line 1: 2 s"]
    # an unterminated block hides nothing after the page ends, and still hides its lines
    assert hand_typed_figures("<!-- figures:a:start -->\n5 ms\n") == []


@pytest.mark.parametrize("page", PAGES, ids=os.path.basename)
def test_every_figure_has_its_command_and_date(page):
    with open(page, encoding="utf-8") as f:
        bare = bare_figures(f.read())
    assert not bare, (f"{os.path.relpath(page, ROOT)}: {RULE}\nFigures without them:\n  "
                      + "\n  ".join(bare))


def test_what_counts_as_a_figure():
    assert figures("97.2% in 18 s, 3.5 ms, 1.22x PyTorch's, 2 GB/s, 40 us, 1.5 min") == \
        ["97.2%", "18 s", "3.5 ms", "1.22x", "2 GB/s", "40 us", "1.5 min"]
    assert figures("46.8-54.8 ms, 1.30-1.54x, 30-40%") == ["54.8 ms", "1.54x", "40%"]
    # shapes, names, settings written as code and plain counts are not figures
    assert figures("a 3x3 kernel, 1024 x 784 inputs, resnet18, `timeout=600 s`, 64 rows, "
                   "x86_64, float16, 2 layers") == []


def test_the_rule_flags_a_bare_figure_and_passes_a_measured_one():
    page = ("# Title\n\nIntro without numbers.\n\n## Speed\n\nThe model reached 97.2% in "
            "18 s.\n\n## Measured\n\n| run | time |\n|---|---|\n| a | 3.1 ms |\n\n"
            "Measured 2026-12-03 with `BENCH_THREADS=1 python benchmarks/bench_x.py`.\n\n"
            "## Half\n\nIt is 2x faster (`python x.py`).\n\n"
            "```\n12 s inside a code block\n```\n\n## Block\n\n1.5x, 2026-12-01:\n\n"
            "    BENCH_THREADS=1 python benchmarks/bench_y.py\n")
    assert bare_figures(page) == [
        "line 7: 97.2%, 18 s -- in '## Speed' (missing: command and date)",
        "line 19: 2x -- in '## Half' (missing: date)"]


def test_every_page_is_checked():
    """The rule reads every page in docs/, so a new page is held to it as it lands."""
    names = {os.path.basename(p) for p in PAGES}
    assert {"model_zoo.md", "benchmarks.md", "architecture.md", "README.md"} <= names
