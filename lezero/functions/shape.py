"""Shape and indexing operators: they move data around without arithmetic, and their
backwards are the inverse moves.

The family is split into three modules, all re-exported here:

* ``shape_basic``: views of the same data (reshape, transpose, swapaxes, moveaxis, squeeze,
  expand_dims, flatten, broadcast_to, sum_to);
* ``shape_join``: joining, splitting and rearranging (concatenate, stack, split, chunk,
  tile, repeat, flip, roll, pad);
* ``shape_index``: indexing (get_item, take, index_select, gather, scatter_add,
  masked_fill, tril, triu, diagonal, one_hot).

Array operators follow NumPy's names and arguments; ``gather``, ``scatter_add``,
``index_select``, ``masked_fill``, ``chunk`` and ``one_hot`` follow PyTorch (argument
order ``(x, axis, index, ...)``, with ``axis`` where PyTorch says ``dim``).
"""
from lezero.functions import shape_basic, shape_index, shape_join
from lezero.functions.shape_basic import *   # noqa: F401,F403
from lezero.functions.shape_index import *   # noqa: F401,F403
from lezero.functions.shape_join import *    # noqa: F401,F403
# The operator classes, for code that builds graphs from them directly.
from lezero.functions.shape_basic import BroadcastTo, Reshape, SumTo, Transpose  # noqa: F401
from lezero.functions.shape_index import GetItem, GetItemGrad  # noqa: F401

__all__ = shape_basic.__all__ + shape_join.__all__ + shape_index.__all__
