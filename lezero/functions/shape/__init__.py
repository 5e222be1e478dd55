"""Shape and indexing operators: they move data around without arithmetic, and their
backwards are the inverse moves.

The family is split into six modules, all re-exported here:

* ``views``: views of the same data (reshape, transpose, swapaxes, moveaxis, squeeze,
  expand_dims, flatten, broadcast_to, sum_to);
* ``join``: joining, splitting and rearranging (concatenate, stack, split, chunk,
  tile, repeat, flip, roll, pad);
* ``index``: indexing (get_item, take, index_select, gather, scatter_add);
* ``scattering``: scatter (torch.scatter, out of place);
* ``masks``: masked_fill, tril, triu, diagonal, one_hot;
* ``shuffle``: between channels and space (pixel_shuffle, pixel_unshuffle,
  channel_shuffle).

Array operators follow NumPy's names and arguments; ``gather``, ``scatter``, ``scatter_add``,
``index_select``, ``masked_fill``, ``chunk`` and ``one_hot`` follow PyTorch (argument
order ``(x, axis, index, ...)``, with ``axis`` where PyTorch says ``dim``).
"""
from lezero.functions.shape import (index as _index, join as _join, masks as _masks,
                                    scattering as _scattering, shuffle as _shuffle,
                                    views as _views)
from lezero.functions.shape.views import *   # noqa: F401,F403
from lezero.functions.shape.index import *   # noqa: F401,F403
from lezero.functions.shape.join import *    # noqa: F401,F403
from lezero.functions.shape.masks import *   # noqa: F401,F403
from lezero.functions.shape.shuffle import *  # noqa: F401,F403
from lezero.functions.shape.scattering import *  # noqa: F401,F403
# The operator classes, for code that builds graphs from them directly.
from lezero.functions.shape.views import BroadcastTo, Reshape, SumTo, Transpose  # noqa: F401
# Array-level helpers other families share.
from lezero.functions.shape.views import axis_tuple, sum_to_array  # noqa: F401
from lezero.functions.shape.index import GetItem, GetItemGrad  # noqa: F401
# Structure from indices (graph adjacency, expert routing): operator classes for layers.
from lezero.functions.shape.structure import (DenseAdjacency, RouteCapacity,  # noqa: F401
                                              RouteTopK, capacity_of, fits_capacity)

__all__ = (_views.__all__ + _join.__all__ + _index.__all__ + _masks.__all__
           + _shuffle.__all__ + _scattering.__all__)
