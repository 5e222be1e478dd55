"""Collate functions: turn a list of samples into one batch of NumPy arrays.

``default_collate`` follows ``torch.utils.data.default_collate`` with NumPy in place of
tensors: arrays are stacked, numbers become arrays, and tuples, lists, named tuples and
dicts are collated field by field.  One deliberate difference: Python floats become
float32 (LeZero's default float), not float64.
"""
import collections.abc
import threading

import numpy as np

from lezero.core import Variable

__all__ = ["default_collate", "default_convert", "variable_collate"]

_local = threading.local()      # the allocator of collate_into, per thread


def default_collate(batch):
    """Collate a list of samples into a batch.

    * arrays of one shape -> ``np.stack`` (a new leading batch axis, dtype kept)
    * Variables -> a constant Variable over the stacked data
    * Python ``bool`` / ``int`` / ``float`` -> a bool / int64 / float32 array
    * NumPy scalars -> an array of their dtype
    * ``str`` and ``bytes`` -> the list as it is
    * dicts -> a dict of collated values; named tuples -> the same named tuple;
      other tuples and lists -> a list of collated fields (as PyTorch does)
    """
    if not isinstance(batch, (list, tuple)):
        raise TypeError(f"default_collate: batch must be a list of samples, "
                        f"got {type(batch).__name__}")
    if len(batch) == 0:
        raise ValueError("default_collate: got an empty batch")
    elem = batch[0]
    if isinstance(elem, np.ndarray):
        return _stack(batch)
    if isinstance(elem, Variable):
        return Variable(_stack([_data_of(v) for v in batch]), requires_grad=False)
    if isinstance(elem, np.generic):
        return np.array(batch, dtype=elem.dtype)
    if isinstance(elem, bool):
        return np.array(batch, dtype=np.bool_)
    if isinstance(elem, int):
        return np.array(batch, dtype=np.int64)
    if isinstance(elem, float):
        return np.array(batch, dtype=np.float32)
    if isinstance(elem, (str, bytes)):
        return list(batch)
    if isinstance(elem, collections.abc.Mapping):
        _check_same_keys(batch)
        fields = {key: default_collate([sample[key] for sample in batch]) for key in elem}
        try:
            return type(elem)(fields)
        except TypeError:      # a mapping type that cannot be built from a dict
            return fields
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):       # named tuple
        return type(elem)(*(default_collate(list(f)) for f in _transpose(batch)))
    if isinstance(elem, collections.abc.Sequence):
        return [default_collate(list(f)) for f in _transpose(batch)]
    raise TypeError(f"default_collate: samples must be arrays, numbers, strings, dicts, "
                    f"tuples or lists; found {type(elem).__name__}")


def default_convert(data):
    """The conversion used when automatic batching is off (``batch_size=None``).

    PyTorch turns arrays into tensors here; LeZero's batches already are NumPy arrays, so
    samples pass through unchanged.
    """
    return data


def variable_collate(batch):
    """``default_collate``, then every array of the batch wrapped in a constant Variable
    (``requires_grad=False``): batches go straight into a model."""
    return _to_variables(default_collate(batch))


def _to_variables(obj):
    if isinstance(obj, np.ndarray) and obj.dtype.kind in "biufc":
        return Variable(obj, requires_grad=False)
    if isinstance(obj, dict):
        return type(obj)((k, _to_variables(v)) for k, v in obj.items())
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*(_to_variables(v) for v in obj))
    if isinstance(obj, (list, tuple)) and not (obj and isinstance(obj[0], (str, bytes))):
        return type(obj)(_to_variables(v) for v in obj)
    return obj


def _data_of(v):
    return v.data if isinstance(v, Variable) else np.asarray(v)


def _stack(arrays):
    shape, dtype, same_dtype = arrays[0].shape, arrays[0].dtype, True
    for i, a in enumerate(arrays):
        if not isinstance(a, np.ndarray):
            raise TypeError(f"default_collate: sample {i} is a {type(a).__name__} but sample 0 "
                            f"is an array")
        if a.shape != shape:
            raise ValueError(f"default_collate: samples have different shapes, {shape} at "
                             f"position 0 and {a.shape} at position {i}; pad them "
                             f"(lezero.data.PadCollate) or pass a collate_fn")
        same_dtype = same_dtype and a.dtype == dtype
    alloc = getattr(_local, "alloc", None)
    if alloc is None:
        return np.stack(arrays)
    if not same_dtype:
        dtype = np.result_type(*arrays)
    return np.stack(arrays, out=alloc((len(arrays),) + shape, dtype))


class collate_into:
    """Context manager: inside it, ``default_collate`` stacks arrays into memory from
    ``alloc(shape, dtype) -> array`` instead of new arrays.

    A DataLoader worker passes an allocator over its shared-memory slot, so a batch is
    stacked straight into the memory it is handed over in (one copy fewer).  Arrays made
    this way belong to the slot: code in a worker must not keep them after the batch.
    """

    def __init__(self, alloc):
        self.alloc = alloc

    def __enter__(self):
        self._saved = getattr(_local, "alloc", None)
        _local.alloc = self.alloc

    def __exit__(self, *exc):
        _local.alloc = self._saved
        return False


def _transpose(batch):
    size = len(batch[0])
    for i, sample in enumerate(batch):
        if len(sample) != size:
            raise ValueError(f"default_collate: samples have different numbers of fields, "
                             f"{size} at position 0 and {len(sample)} at position {i}")
    return zip(*batch)


def _check_same_keys(batch):
    keys = set(batch[0])
    for i, sample in enumerate(batch):
        if set(sample) != keys:
            raise ValueError(f"default_collate: dict samples have different keys, "
                             f"{sorted(map(str, keys))} at position 0 and "
                             f"{sorted(map(str, sample))} at position {i}")
