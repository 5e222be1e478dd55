"""How a dense parameter is cut into tensor-parallel shards, and put back together.

A ``ShardSpec`` says how one parameter of a parallel layer relates to the dense
parameter it stands for:

* ``axis``: the axis that is split (0: rows of an (out, in) weight, a column-parallel
  layer; 1: columns, a row-parallel one);
* ``full``: the dense length of that axis (the vocabulary, ``out_features``...);
* ``padded``: ``full`` rounded up so that it divides into ``size`` equal shards (Megatron
  pads the vocabulary the same way); the padding rows are zeros that the layers mask;
* ``stride``: Megatron's partition stride.  The axis is cut into ``stride * size`` equal
  chunks and rank r keeps chunks ``r, r + size, r + 2 size, ...`` -- so a fused
  query/key/value weight (stride 3) gives each rank the queries, keys *and* values of its
  own heads, in the dense (nanoGPT / PyTorch) layout.

``shard`` and ``unshard`` are exact inverses; the state-dict functions (``state.py``)
and the layers' initialisation use them, so there is one definition of the layout.
"""
from typing import NamedTuple

from lezero import cuda


class ShardSpec(NamedTuple):
    axis: int
    full: int
    padded: int
    stride: int = 1

    def local(self, size):
        """The shard's length along ``axis`` on each of ``size`` ranks."""
        return self.padded // size


def padded_size(n, size, multiple=1):
    """``n`` rounded up to a multiple of ``size * multiple``."""
    step = size * multiple
    return -(-n // step) * step


def make_spec(where, axis, full, size, stride=1, pad=False):
    """A ShardSpec, refusing what cannot be cut evenly (unless ``pad``)."""
    if pad and stride == 1:
        return ShardSpec(axis, full, padded_size(full, size), 1)
    if full % (size * stride):
        what = f"{full}" if stride == 1 else f"{full} (= {stride} parts of {full // stride})"
        raise ValueError(f"{where}: {what} does not divide into {size} tensor-parallel "
                         f"shards{'' if stride == 1 else f' of {stride} parts each'}; "
                         "choose a size that divides")
    return ShardSpec(axis, full, full, stride)


def shard(full, spec, rank, size):
    """This rank's shard of the dense array ``full`` (padded with zeros as needed)."""
    xp = cuda.get_array_module(full)
    axis = spec.axis % full.ndim
    if full.shape[axis] != spec.full:
        raise ValueError(f"shard: the dense array has length {full.shape[axis]} along axis "
                         f"{axis}, the layer expects {spec.full}")
    if spec.padded != spec.full:
        pad = [(0, 0)] * full.ndim
        pad[axis] = (0, spec.padded - spec.full)
        full = xp.pad(full, pad)
    chunks = xp.split(full, spec.stride * size, axis=axis)
    mine = [chunks[rank + j * size] for j in range(spec.stride)]
    return xp.ascontiguousarray(xp.concatenate(mine, axis=axis))


def unshard(parts, spec):
    """The dense array from every rank's shard (a list in rank order); trims padding."""
    xp = cuda.get_array_module(parts[0])
    size = len(parts)
    axis = spec.axis % parts[0].ndim
    pieces = [xp.split(p, spec.stride, axis=axis) for p in parts]
    ordered = [pieces[r][j] for j in range(spec.stride) for r in range(size)]
    full = xp.concatenate(ordered, axis=axis)
    if spec.padded != spec.full:
        index = [slice(None)] * full.ndim
        index[axis] = slice(0, spec.full)
        full = full[tuple(index)]
    return xp.ascontiguousarray(full)


def tp_comm(comm, where="lezero.parallel"):
    """The tensor-parallel communicator: ``comm``; else the current Grid's tensor group;
    else the world."""
    if comm is None:
        from lezero.parallel.grid import current_grid
        grid = current_grid()
        if grid is not None:
            return grid.tp_comm
    from lezero.parallel.world import resolve
    return resolve(comm, where)
