"""``lezero.data``: datasets, samplers, transforms and a multi-process ``DataLoader``.

Names and arguments follow ``torch.utils.data``; batches are NumPy arrays (wrap them in
Variables, or pass ``collate_fn=variable_collate``)::

    from lezero.data import DataLoader, TensorDataset
    loader = DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True, num_workers=2,
                        seed=0)
    for xb, yb in loader:
        ...

Transforms live in ``lezero.data.transforms``, datasets in ``lezero.data.datasets``.
"""
from lezero.data._random import get_rng
from lezero.data._workers import WorkerInfo, get_worker_info
from lezero.data.bucketing import BucketBatchSampler, PadCollate, pad_sequence, padding_waste
from lezero.data.collate import default_collate, default_convert, variable_collate
from lezero.data.dataset import (ChainDataset, ConcatDataset, Dataset, IterableDataset, Subset,
                                 TensorDataset, random_split)
from lezero.data.loader import DataLoader
from lezero.data.progress import progress
from lezero.data.sampler import (BatchSampler, DistributedSampler, RandomSampler, Sampler,
                                 SequentialSampler, SubsetRandomSampler, WeightedRandomSampler)

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "Subset", "ConcatDataset",
           "ChainDataset", "random_split", "DataLoader", "Sampler", "SequentialSampler",
           "RandomSampler", "SubsetRandomSampler", "WeightedRandomSampler", "BatchSampler",
           "DistributedSampler", "BucketBatchSampler", "PadCollate", "pad_sequence",
           "padding_waste", "default_collate", "default_convert", "variable_collate",
           "get_worker_info", "WorkerInfo", "get_rng", "progress", "transforms", "datasets"]


def __getattr__(name):
    # transforms and datasets load on first use: datasets pulls in more than most need.
    if name in ("transforms", "datasets"):
        import importlib
        return importlib.import_module(f"lezero.data.{name}")
    raise AttributeError(f"module 'lezero.data' has no attribute {name!r}")
