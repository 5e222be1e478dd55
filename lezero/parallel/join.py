"""``DataParallel.join()``: training with a different number of batches on each rank.

Without it, a rank that runs out of batches stops calling collectives while the others
wait in their next all-reduce for it (the stall report then says so).  Inside
``with model.join():`` every training forward first all-reduces a small vector saying
which ranks are still active (and whether this step synchronises gradients).  A rank
that leaves the loop keeps answering that vector and shadows each step of the others
with zero gradients -- the same all-reduces, in the same order -- until no rank is
active.  Then every rank takes the parameters and buffers of the last rank to finish,
so all replicas leave ``join`` equal (as PyTorch's ``Join`` does).

Gradients are divided by the world size (``divide_by_initial_world_size=True``, PyTorch's
default: joined ranks count as zero gradients) or by the active ranks.  Each step inside
must be one forward and one backward; SyncBatchNorm is not supported (a joined rank
cannot reproduce its forward collectives).  Optimizer state of a joined rank (momentum,
Adam moments) is not updated by the broadcast.
"""
import numpy as np

from lezero.parallel import graph


class Join:
    """The context manager returned by ``DataParallel.join()``."""

    def __init__(self, dp, divide_by_initial_world_size=True):
        from lezero.parallel.sync_batchnorm import SyncBatchNorm
        from lezero.utils.checks import check_bool
        self.dp = dp
        self.divide = check_bool("DataParallel.join", "divide_by_initial_world_size",
                                 divide_by_initial_world_size)
        if any(isinstance(m, SyncBatchNorm) for m in dp.module.modules()):
            raise ValueError("DataParallel.join: the model has SyncBatchNorm layers, whose "
                             "forward communicates; a rank without data cannot shadow "
                             "them.  Make the ranks' batch counts equal instead "
                             "(DistributedSampler(drop_last=True) or pad=True)")
        self.authority = 0
        self.last_active = list(range(dp.comm.size))

    def _exchange(self, active):
        comm = self.dp.comm
        flags = np.zeros(comm.size + 1, np.int32)
        if active:
            flags[comm.rank] = 1
            flags[-1] = int(self.dp._reducer.sync)
        comm.allreduce(flags, "sum", out=flags)
        ranks = [r for r in range(comm.size) if flags[r]]
        if ranks:
            self.last_active = ranks
            self.authority = ranks[0]
        return ranks, bool(flags[-1])

    def before_forward(self):
        """An active rank's training forward: announce it, learn who else is active."""
        ranks, _ = self._exchange(True)
        if not self.divide:
            self.dp._reducer.divisor = len(ranks)

    def __enter__(self):
        if self.dp._join is not None:
            raise RuntimeError("DataParallel.join: already inside a join() block")
        self.dp._join = self
        return self

    def __exit__(self, etype, value, tb):
        dp = self.dp
        dp._join = None
        if etype is not None:
            return False              # an error: let it end the job, do not shadow
        comm = dp.comm
        while True:
            ranks, syncing = self._exchange(False)
            if not ranks:
                break
            if dp.broadcast_buffers and dp.training:
                graph.broadcast_buffers(dp.module, comm, self.authority)
            if syncing:
                dp._reducer.shadow()
        root = self.last_active[0]
        for p in dp.module.parameters():
            comm.bcast(p.data, root)
        graph.broadcast_buffers(dp.module, comm, root)
        dp._reducer.divisor = comm.size
        return False
