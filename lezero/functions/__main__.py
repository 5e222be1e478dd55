"""``python -m lezero.functions --count`` / ``--markdown docs/operators.md``: the registry CLI."""
import sys

from lezero.functions.registry import main

sys.exit(main())
