"""``lezero.parallel`` (also ``lezero.distributed``): training on several processes.

    from lezero import parallel
    world = parallel.init()                   # mpiexec -n 4 python train.py
    model = parallel.DataParallel(model)      # gradients averaged while backward runs

* the world and its ``Communicator`` (``world.py``, ``comm.py``): ``rank``, ``size``,
  ``allreduce`` / ``iallreduce``, ``bcast``, ``send`` / ``recv``, ``allgather``,
  ``reduce_scatter``, ``alltoall``, ``barrier``, ``split`` ... on NumPy and CuPy arrays,
  over MPI (mpi4py, imported only by ``init()``) or, for one process without MPI, the
  one-process world;
* differentiable collectives for parallel layers (``collectives.py``);
* ``DataParallel``, ``SyncBatchNorm`` and ``convert_sync_batchnorm``;
* failure handling: one rank's uncaught exception aborts the job with its traceback, a
  wait past ``timeout`` prints a stall report (``failure.py``, ``stall.py``);
* ``save_checkpoint`` / ``load_checkpoint`` for data-parallel runs.

See docs/parallel.md.
"""
from lezero.parallel.checkpoint import load_checkpoint, save_checkpoint
from lezero.parallel.collectives import (AllGather, AllReduce, Broadcast,
                                         CopyToParallelRegion, GatherFromParallelRegion,
                                         ReduceFromParallelRegion, ReduceScatter,
                                         ScatterToParallelRegion, all_gather, all_reduce,
                                         broadcast, copy_to_parallel_region,
                                         gather_from_parallel_region,
                                         reduce_from_parallel_region, reduce_scatter,
                                         scatter_to_parallel_region)
from lezero.parallel.comm import Communicator
from lezero.parallel.data_parallel import DataParallel
from lezero.parallel.requests import CollectiveTimeoutError, Request
from lezero.parallel.sync_batchnorm import SyncBatchNorm, convert_sync_batchnorm
from lezero.parallel.timeline import Timeline
from lezero.parallel.world import (get_rank, get_world, get_world_size, init,
                                   is_initialized)

DistributedDataParallel = DataParallel      # the name PyTorch users type

__all__ = ["init", "get_world", "is_initialized", "get_rank", "get_world_size",
           "Communicator", "Request", "CollectiveTimeoutError", "DataParallel",
           "DistributedDataParallel", "SyncBatchNorm", "convert_sync_batchnorm", "Timeline",
           "save_checkpoint", "load_checkpoint", "all_reduce", "all_gather",
           "reduce_scatter", "broadcast", "copy_to_parallel_region",
           "reduce_from_parallel_region", "scatter_to_parallel_region",
           "gather_from_parallel_region", "AllReduce", "AllGather", "ReduceScatter",
           "Broadcast", "CopyToParallelRegion", "ReduceFromParallelRegion",
           "ScatterToParallelRegion", "GatherFromParallelRegion"]
