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
  wait past ``timeout`` prints a stall report (``failure.py``, ``stall.py``); a rank that
  ends early or dies ends the job, naming the rank (``lifecycle.py``, ``guardian.py``);
  ranks that disagree on a collective's shape, dtype or kind raise ``ValueError`` on every
  rank before data moves (``agree.py``);
* ``save_checkpoint`` / ``load_checkpoint`` for data-parallel runs.

Parallel II (``tensor/``, ``pipeline/``, ``grid.py``):

* tensor parallelism: ``ColumnParallelLinear``, ``RowParallelLinear``,
  ``VocabParallelEmbedding``, ``vocab_parallel_cross_entropy``, the head-split
  ``ParallelCausalSelfAttention``, ``ParallelMLP``, ``ParallelBlock``, ``ParallelGPT``;
  dropout RNG per tensor rank; dense state dicts in and out; sharded checkpoints;
* ``CommAccounting``: collectives, counts and bytes per layer and step;
* pipeline parallelism: schedules as data (``Schedule``, ``gpipe``, ``one_f_one_b``,
  ``interleaved_one_f_one_b``), ``simulate``, ``check_schedule``, ``timeline_text``,
  ``plot_timeline``, and ``Pipeline``, which runs them over send/recv;
* ``Grid(dp, tp, pp)``: the process grid and its sub-communicators.

See docs/parallel.md.
"""
from lezero.parallel.accounting import CommAccounting
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
from lezero.parallel.grads import agree_on_nonfinite, allreduce_gradients
from lezero.parallel.grid import Coord, Grid, GridLayout, current_grid, set_grid
from lezero.parallel.grid_gpt import GridGPT
from lezero.parallel.pipeline import (Op, Pipeline, Schedule, ScheduleError, SimResult,
                                      bubble_theory, check_schedule, gpipe,
                                      interleaved_one_f_one_b, make_schedule, one_f_one_b,
                                      plot_timeline, simulate, split_sequential,
                                      timeline_text)
from lezero.parallel.requests import CollectiveTimeoutError, Request
from lezero.parallel.sync_batchnorm import SyncBatchNorm, convert_sync_batchnorm
from lezero.parallel.tensor import (ColumnParallelLinear, GPTStage, ParallelBlock,
                                    ParallelCausalSelfAttention, ParallelGPT, ParallelMLP,
                                    RowParallelLinear, ShardSpec, VocabParallelEmbedding,
                                    consolidate_checkpoint, dense_state_dict,
                                    load_dense_state_dict, load_sharded_checkpoint,
                                    model_parallel_manual_seed, model_parallel_rng,
                                    save_sharded_checkpoint, shard_state_dict,
                                    vocab_parallel_cross_entropy)
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
           "ScatterToParallelRegion", "GatherFromParallelRegion",
           # Parallel II
           "ColumnParallelLinear", "RowParallelLinear", "VocabParallelEmbedding",
           "vocab_parallel_cross_entropy", "ParallelCausalSelfAttention", "ParallelMLP",
           "ParallelBlock", "ParallelGPT", "GPTStage", "ShardSpec", "model_parallel_manual_seed",
           "model_parallel_rng", "load_dense_state_dict", "dense_state_dict",
           "shard_state_dict", "save_sharded_checkpoint", "load_sharded_checkpoint",
           "consolidate_checkpoint", "CommAccounting", "allreduce_gradients",
           "agree_on_nonfinite", "Pipeline", "Op", "Schedule", "ScheduleError", "SimResult",
           "gpipe", "one_f_one_b", "interleaved_one_f_one_b", "make_schedule",
           "bubble_theory", "simulate", "check_schedule", "timeline_text", "plot_timeline",
           "split_sequential", "Grid", "GridLayout", "Coord", "current_grid", "set_grid", "GridGPT"]
