"""``python -m lezero.functions --count`` / ``--markdown docs/operators.md``: the registry CLI.

``--coverage`` prints (or writes) the table of which operator has numerical, PyTorch and
double-backward checks, derived from a test run (``lezero.testing.check_table``).
"""
import sys

if "--coverage" in sys.argv[1:]:
    from lezero.testing.check_table import main as coverage_main
    sys.exit(coverage_main([a for a in sys.argv[1:] if a != "--coverage"]))

from lezero.functions.registry import main  # noqa: E402

sys.exit(main())
