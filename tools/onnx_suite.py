"""Run ONNX's node test cases with LeZero (and onnxruntime) and print the pass table.

    python tools/onnx_suite.py                      # totals + per-operator table
    python tools/onnx_suite.py --record onnx_suite  # ... recorded into docs/onnx.md
    python tools/onnx_suite.py --json status.json   # every case: name, ops, status, detail
    python tools/onnx_suite.py --write-exclusions   # lezero/onnx/backend_exclusions.txt
                                                    # from the cases that fail now
    python tools/onnx_suite.py --list               # the wrong and erroring cases

Classification and tables live in ``lezero.onnx.suite_table``.
"""
import argparse
import collections
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

from _record import run_main  # noqa: E402
from lezero.onnx import suite_table  # noqa: E402


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", help="write every case's classification to this file")
    p.add_argument("--write-exclusions", action="store_true",
                   help="regenerate the exclusion file from the current failures")
    p.add_argument("--list", action="store_true", help="list wrong and erroring cases")
    p.add_argument("--no-onnxruntime", action="store_true", help="run LeZero only")
    return p.parse_args(argv)


def print_failures(rows):
    """The silently wrong cases, then the erroring ones grouped by operator and cause."""
    print("\nSilently wrong (name, operator: what differs):")
    for r in rows:
        if r["status"] == "WRONG":
            print(f"  {r['name']} ({r['op']}): {r['detail']}")
    groups = collections.defaultdict(list)
    for r in rows:
        if r["status"] == "error":
            groups[(r["op"], suite_table.error_category(r))].append(r)
    print("\nErrors by operator and cause:")
    for (op, category), group in sorted(groups.items()):
        print(f"  {op} [{category}] {len(group)}: {group[0]['detail'][:160]}")
        print(f"      {', '.join(r['name'] for r in group)[:400]}")


def main(argv=None):
    args = parse(argv)
    old = suite_table.read_exclusions()
    rows = suite_table.classify(exclusions=old, with_onnxruntime=not args.no_onnxruntime)
    if args.write_exclusions:
        entries = suite_table.regenerate_exclusions(rows, old)
        suite_table.write_exclusions(entries)
        print(f"wrote {len(entries)} entries to {suite_table.EXCLUSIONS_PATH}", file=sys.stderr)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump([{k: r[k] for k in ("name", "op", "ops", "status", "detail",
                                          "excluded", "onnxruntime")} for r in rows],
                      f, indent=1)
    print(suite_table.markdown_table(rows))
    if args.list:
        print_failures(rows)
    return rows


if __name__ == "__main__":
    run_main(main)
