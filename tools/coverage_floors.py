"""Fail when line coverage falls below its floors: the package as a whole, and each module.

    python tools/coverage_floors.py coverage.json [--package 90] [--module 75]

Reads the JSON report of coverage.py (``pytest --cov=lezero --cov-report=json:PATH``)
that ``make test`` writes, prints the lowest modules, and exits 1 naming every module
under its floor.  ``EXEMPT`` lists the modules measured elsewhere, each with the reason.
"""
import argparse
import json
import os
import sys

# Modules whose code runs only in processes the coverage of the test run cannot see.
EXEMPT = {
    "lezero/__main__.py": "the command-line entry, run in a subprocess by its test",
    "lezero/functions/__main__.py": "the registry CLI, run in a subprocess by its tests",
    "lezero/serving/__main__.py": "the server CLI, run in a subprocess by tests/serving",
}
# Whole packages measured elsewhere: below the floor here, printed every run, not failed.
EXEMPT_PACKAGES = {
    "lezero/parallel/": "run by ranks under mpiexec (make test-mpi, tests/parallel), "
                        "which this coverage run does not measure",
    "lezero/testing/conformance/": "the backend conformance suite's own tests, run by "
                                   "make test-backends (pytest --pyargs "
                                   "lezero.testing.conformance), which this coverage run "
                                   "does not measure",
}
# Modules below the floor that still need tests (figures of the 2026-12-03 run).  Printed
# every run so they stay visible; remove an entry once its module passes the floor.
KNOWN_BELOW = {
    "lezero/data/_workers.py": "the DataLoader's worker processes: 89% when tests/data run "
                               "alone, but in the full parallel run some workers' coverage "
                               "data is not saved (55.5% on 2026-12-03); the lines are tested",
}


def tolerated(path):
    """Why a module under the floor does not fail the run (None: it does)."""
    if path in EXEMPT:
        return EXEMPT[path]
    for prefix, why in EXEMPT_PACKAGES.items():
        if path.startswith(prefix):
            return why
    return KNOWN_BELOW.get(path)


def module_rows(report):
    """(path, covered lines, statements, percent) per module, lowest percent first."""
    rows = []
    for path, entry in report["files"].items():
        path = os.path.relpath(path) if os.path.isabs(path) else path   # report run elsewhere
        s = entry["summary"]
        if s["num_statements"] == 0:
            continue
        rows.append((path, s["covered_lines"], s["num_statements"], s["percent_covered"]))
    return sorted(rows, key=lambda r: r[3])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report")
    parser.add_argument("--package", type=float, default=90.0, help="floor for the package")
    parser.add_argument("--module", type=float, default=75.0, help="floor for each module")
    parser.add_argument("--show", type=int, default=8, help="print the N lowest modules")
    args = parser.parse_args(argv)
    with open(args.report, encoding="utf-8") as f:
        report = json.load(f)
    total = report["totals"]["percent_covered"]
    rows = module_rows(report)
    print(f"coverage: package {total:.1f}% (floor {args.package:g}%), "
          f"{len(rows)} modules (floor {args.module:g}% each); lowest:")
    for path, covered, statements, pct in rows[:args.show]:
        print(f"  {pct:5.1f}%  {covered:>5}/{statements:<5} {path}")
    failures = [f"package {total:.1f}% < {args.package:g}%"] if total < args.package else []
    below = [(path, pct) for path, _, _, pct in rows if pct < args.module]
    for path, pct in below:
        if tolerated(path):
            print(f"  below the floor, tolerated: {path} {pct:.1f}% ({tolerated(path)})")
    failures += [f"{path} {pct:.1f}% < {args.module:g}%" for path, pct in below
                 if not tolerated(path)]
    for line in failures:
        print(f"coverage floor crossed: {line}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
