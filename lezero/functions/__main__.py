"""``python -m lezero.functions --count`` / ``--markdown docs/operators.md``: the registry CLI.

``--coverage`` prints (or writes) the table of which operator has numerical, PyTorch and
double-backward checks, derived from a test run (``lezero.testing.check_table``).
"""
import sys

from lezero.functions.registry import main


def coverage(argv):
    """The ``--coverage`` command: its code lives with the checks, in lezero.testing (a
    higher floor, so it is imported here, on use)."""
    from lezero.testing.check_table import main as coverage_main
    return coverage_main(argv)


if "--coverage" in sys.argv[1:]:
    sys.exit(coverage([a for a in sys.argv[1:] if a != "--coverage"]))
sys.exit(main())
