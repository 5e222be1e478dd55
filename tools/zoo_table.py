"""Regenerate the results table of docs/model_zoo.md from runs of the examples.

    python tools/zoo_table.py                 # run every example, then rewrite the table
    python tools/zoo_table.py --quick         # the budget mode: one epoch per run
    python tools/zoo_table.py --no-run        # only rebuild the table from the recorded runs
    python tools/zoo_table.py --only vision   # runs whose example name contains "vision"

Each ``examples/train_*.py`` is run as ``python examples/NAME.py ARGS --out DIR``: once,
or once per entry of a module-level ``ZOO_RUNS = [[args...], ...]`` literal when the
script defines one (a script covering several models).  Every run writes
``DIR/summary.json`` through ``examples/_common.write_summary``; each is archived as
``docs/zoo_runs/<model>.json`` and the table is built from those records alone (smoke runs
are skipped), so every figure in it carries the command and the date of the run that
measured it.  No number is typed by hand.

The table sits between the ``<!-- zoo-table:start -->`` and ``<!-- zoo-table:end -->``
markers; the prose around it is kept.
"""
import argparse
import ast
import glob
import json
import os
import shlex
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
START, END = "<!-- zoo-table:start -->", "<!-- zoo-table:end -->"
QUICK_ARGS = ["--epochs", "1"]
# Runs are archived here (one JSON per model, committed): runs/ is local and not kept.
ARCHIVE = os.path.join(ROOT, "docs", "zoo_runs")
COLUMNS = ["model", "task", "data", "parameters", "result", "train time", "date", "command"]


def example_runs(path):
    """The argument lists to run ``path`` with: its ``ZOO_RUNS`` literal, or one bare run."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "ZOO_RUNS"
                                                for t in node.targets):
            runs = ast.literal_eval(node.value)
            if not (isinstance(runs, list) and all(isinstance(r, list) for r in runs)):
                raise ValueError(f"{path}: ZOO_RUNS must be a list of argument lists")
            return runs
    return [[]]


def planned_runs(out_root, only=None, quick=False):
    """[(name, command list, out dir)] for every example run."""
    plans = []
    for path in sorted(glob.glob(os.path.join(ROOT, "examples", "train_*.py"))):
        stem = os.path.splitext(os.path.basename(path))[0]
        for args in example_runs(path):
            name = "-".join([stem] + [a.lstrip("-") for a in args if a != "--model"])
            if only and only not in name:
                continue
            out = os.path.join(out_root, name)
            cmd = [sys.executable, os.path.relpath(path, ROOT), *args,
                   *(QUICK_ARGS if quick else []), "--out", out]
            plans.append((name, cmd, out))
    return plans


def run_all(plans, timeout):
    """Run each plan (single-threaded BLAS/Numba, as the examples' --threads 1 does);
    returns {name: (returncode, seconds)}."""
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               MKL_NUM_THREADS="1", NUMBA_NUM_THREADS="1", MPLBACKEND="Agg")
    results = {}
    for i, (name, cmd, out) in enumerate(plans):
        print(f"[{i + 1}/{len(plans)}] {' '.join(shlex.quote(c) for c in cmd[1:])}", flush=True)
        t0 = time.perf_counter()
        try:
            rc = subprocess.run(cmd, cwd=ROOT, env=env, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
        results[name] = (rc, time.perf_counter() - t0)
        if rc != 0:
            print(f"  {name} failed: {rc}", flush=True)
    return results


def _read(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def collect(out_root, archive=None):
    """Every non-smoke run: the summary.json files under ``out_root`` (fresh runs) and the
    archived ones in ``archive``; a fresh run replaces the archived run of the same
    command.  Sorted by task, then model."""
    runs = {}
    archived = sorted(glob.glob(os.path.join(archive, "*.json"))) if archive else []
    fresh = sorted(glob.glob(os.path.join(out_root, "**", "summary.json"), recursive=True))
    for path in archived + fresh:
        summary = _read(path)
        if not summary.get("smoke"):
            runs[_command(summary)] = summary
    return sorted(runs.values(), key=lambda s: (s.get("task", ""), s.get("model", "")))


def archive_runs(out_root, archive):
    """Copy each fresh non-smoke summary into ``archive`` as ``<model>.json`` (the record
    the table is rebuilt from after ``runs/`` is gone), its command as a reader would type
    it (no local ``--out`` folder); returns the paths written."""
    from lezero.utils.files import atomic_write
    written = []
    os.makedirs(archive, exist_ok=True)
    for path in sorted(glob.glob(os.path.join(out_root, "**", "summary.json"), recursive=True)):
        summary = _read(path)
        if summary.get("smoke"):
            continue
        summary["command"] = _command(summary)
        target = os.path.join(archive, f"{summary['model']}.json")
        atomic_write(target, json.dumps(summary, indent=1) + "\n")
        written.append(target)
    return written


def _command(summary):
    """The run's command as it was typed, without its ``--out DIR`` (a local choice) and
    with the interpreter shown as ``python``."""
    words = shlex.split(summary.get("command", ""))
    if words:
        words[0] = "python"
    kept, skip = [], False
    for w in words:
        if skip:
            skip = False
        elif w == "--out":
            skip = True
        elif not w.startswith("--out="):
            kept.append(os.path.relpath(w, ROOT) if os.path.isabs(w) and
                        w.startswith(ROOT) else w)
    return " ".join(shlex.quote(w) for w in kept)


def _result(summary):
    value = summary["value"]
    shown = f"{value * 100:.1f}%" if summary["metric"].endswith("acc") or \
        summary["metric"] in ("exact_match",) else f"{value:.4g}"
    return f"{summary['metric']} {shown}"


def render(rows):
    """The markdown table (and its provenance line) for ``rows``."""
    if not rows:
        return "_No runs recorded yet: `make zoo-table` fills this table._\n"
    dates = sorted({r.get("date", "?") for r in rows})
    machines = ", ".join(sorted({r.get("machine", "?") for r in rows}))
    lines = [f"Generated by `python tools/zoo_table.py` from {len(rows)} runs "
             f"({dates[0]} to {dates[-1]}, {machines}); each figure is what its run printed "
             "and wrote to its summary.json; train time is the epochs' wall time.", "",
             "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for r in rows:
        params = f"{r['parameters']:,}" if isinstance(r.get("parameters"), int) else "n/a"
        cells = [r.get("model", "?"), r.get("task", "?"), r.get("data", "?"), params,
                 _result(r), f"{r.get('seconds', 0):.0f} s", r.get("date", "?"),
                 f"`{_command(r)}`"]
        lines.append("| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"


def replace_table(doc_text, table):
    """``doc_text`` with the part between the markers replaced by ``table``."""
    if START not in doc_text or END not in doc_text:
        raise ValueError(f"the document has no {START} ... {END} markers")
    head, rest = doc_text.split(START, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{START}\n{table}{END}{tail}"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help=f"budget mode: every run gets {' '.join(QUICK_ARGS)}")
    p.add_argument("--no-run", dest="run", action="store_false",
                   help="do not run the examples; rebuild the table from existing runs")
    p.add_argument("--out-root", default=os.path.join(ROOT, "runs", "zoo"),
                   help="where the runs write (one folder per run)")
    p.add_argument("--only", help="run only the examples whose run name contains this")
    p.add_argument("--timeout", type=float, default=3600, help="seconds per run")
    p.add_argument("--doc", default=os.path.join(ROOT, "docs", "model_zoo.md"))
    p.add_argument("--archive", default=ARCHIVE,
                   help="the folder of recorded runs (one JSON per model)")
    args = p.parse_args(argv)
    failed = []
    if args.run:
        results = run_all(planned_runs(args.out_root, args.only, args.quick), args.timeout)
        failed = [name for name, (rc, _) in results.items() if rc != 0]
    from lezero.utils.files import atomic_write
    with open(args.doc, encoding="utf-8") as f:
        text = f.read()
    if args.run:
        archive_runs(args.out_root, args.archive)
    rows = collect(args.out_root, args.archive)
    atomic_write(args.doc, replace_table(text, render(rows)))
    print(f"wrote {len(rows)} rows into {args.doc}" +
          (f"; failed runs: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
