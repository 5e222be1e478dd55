"""The operator checks now live in the package: ``lezero.testing``."""
from lezero.testing import *  # noqa: F401,F403
from lezero.testing import _as_list  # noqa: F401
