"""PyTorch's names for operators LeZero calls by NumPy's: ``F.cat``, ``F.clamp``.

They are aliases (``registry.ALIASES``), not new operators: ``python -m lezero.functions
--count`` counts each operator once, under its NumPy name.
"""
from lezero.functions.math import clip
from lezero.functions.registry import alias
from lezero.functions.shape import concatenate

__all__ = ["cat", "clamp"]

cat = alias("cat", "concatenate", concatenate)


def clamp(input, min=None, max=None):
    """``torch.clamp``: ``clip(input, min, max)`` under PyTorch's argument names."""
    return clip(input, min, max)


alias("clamp", "clip", clamp)
