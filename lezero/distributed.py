"""``lezero.distributed``: the same module as ``lezero.parallel`` (the name PyTorch users
look for): ``import lezero.distributed as dist; dist is lezero.parallel``."""
import sys

from lezero import parallel

sys.modules[__name__] = parallel
