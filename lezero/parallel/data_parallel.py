"""``DataParallel``: every rank trains a replica; gradients are averaged while backward runs.

    model = parallel.DataParallel(model)          # mpiexec -n 4 python train.py
    for x, t in loader:                           # each rank its own shard of the batch
        loss = F.cross_entropy(model(x), t)
        opt.zero_grad(); loss.backward(); opt.step()

How it works (the same plan as PyTorch DDP):

* on wrapping, rank 0's parameters and buffers are broadcast, so all replicas start equal
  (and a mismatch between the ranks' models is an error naming the first difference);
* parameters are cut into buckets of ``bucket_mb`` MiB in reverse registration order
  (``buckets.py``; rebuilt after the first step in the order gradients arrived); each parameter's post-accumulate-grad hook copies its finished
  gradient into its bucket, and the hook that completes a bucket starts that bucket's
  non-blocking all-reduce -- buckets start in index order on every rank, so the ranks'
  collectives always line up -- while backward goes on computing earlier layers;
* **where the wait happens**: the hook that completes the *last* bucket -- the moment the
  last gradient of the backward exists -- waits for all the all-reduces and writes the
  averaged gradients (sum / size) into ``p.grad``.  So ``loss.backward()`` returns with
  averaged gradients and a plain ``loss.backward(); opt.step()`` loop (or a GradScaler,
  or gradient clipping) needs nothing else;
* ``no_sync()`` skips the communication (gradients accumulate locally); the next
  synchronised backward averages the accumulated sum;
* ``find_unused_parameters=True`` walks the graph after each forward and marks the
  parameters it does not reach as ready (their slots hold zeros); without it, the first
  forward checks once and raises an error naming any unreachable parameter, and a
  later backward that misses a parameter is reported at the next forward;
* ``broadcast_buffers=True`` copies rank 0's buffers (BatchNorm running statistics) to
  every rank at each training forward;
* ``timeline()`` returns what happened per bucket (``timeline.py``);
* ``join()`` lets ranks with fewer batches shadow the others' steps (``join.py``).
"""
import contextlib
import time

from lezero.core import get_config
from lezero.nn.module import Module
from lezero.parallel import graph
from lezero.parallel.buckets import build_buckets
from lezero.parallel.reducer import Reducer
from lezero.parallel.timeline import Timeline
from lezero.utils.checks import check_bool, check_number


class DataParallel(Module):
    """Wrap ``module`` for data-parallel training over ``comm`` (default: the world).

    ``bucket_mb``: bucket size in MiB (``float('inf')``: one all-reduce after backward).
    ``broadcast_buffers``, ``find_unused_parameters``: as in ``torch.nn.parallel.
    DistributedDataParallel``.  The wrapped model is ``.module`` (state_dict keys get the
    ``module.`` prefix, as in PyTorch; save ``dp.module.state_dict()`` for plain keys).
    """

    def __init__(self, module, comm=None, bucket_mb=25, broadcast_buffers=True,
                 find_unused_parameters=False):
        super().__init__()
        where = "DataParallel"
        if not isinstance(module, Module):
            raise TypeError(f"{where}: module must be an nn.Module, got "
                            f"{type(module).__name__}")
        from lezero.parallel.world import resolve
        comm = resolve(comm, where)
        bucket_mb = check_number(where, "bucket_mb", bucket_mb, 0, low_open=True)
        self.module = module
        self.comm = comm
        self.bucket_mb = bucket_mb
        self.broadcast_buffers = check_bool(where, "broadcast_buffers", broadcast_buffers)
        self.find_unused_parameters = check_bool(where, "find_unused_parameters",
                                                 find_unused_parameters)
        named = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        if not named:
            raise ValueError(f"{where}: the module has no parameters that require grad "
                             "(a model of lazy layers gets them at its first forward: run "
                             "one batch through it before wrapping)")
        self._check_replicas(named)
        self._broadcast_state()
        cap = bucket_mb * 2 ** 20
        buckets = build_buckets(named, cap)
        epoch = time.perf_counter()          # right after a collective: ranks roughly agree
        self._timeline = Timeline([b.info() for b in buckets], comm.rank, comm.size, epoch,
                                  cap)
        self._names = {p: n for n, p in named}
        self._reducer = Reducer(buckets, comm, self._timeline, self.find_unused_parameters,
                                self._names, cap)
        self._first_forward_checked = False
        self._join = None

    # ----- wrapping -----------------------------------------------------------------
    def _check_replicas(self, named):
        """All ranks must wrap the same architecture with the same settings (the bucket
        all-reduces are not checked one by one: their layout follows from these); say
        where they differ -- on every rank."""
        if self.comm.size == 1:
            return
        settings = {"bucket_mb": self.bucket_mb, "broadcast_buffers": self.broadcast_buffers,
                    "find_unused_parameters": self.find_unused_parameters}
        everyone = self.comm.allgather_object((settings, [(n, tuple(p.shape), str(p.dtype))
                                                          for n, p in named]))
        first = everyone[0][0]
        for rank, (theirs, _) in enumerate(everyone):
            diff = [f"{k}={first[k]!r} on rank 0 but {theirs[k]!r} on rank {rank}"
                    for k in settings if theirs[k] != first[k]]
            if diff:
                raise ValueError(f"DataParallel: the ranks were given different settings "
                                 f"({'; '.join(diff)}); every rank must wrap its model alike")
        mine = everyone[self.comm.rank][1]
        for rank, (_, theirs) in enumerate(everyone):
            if theirs != mine:
                diff = next((f"{a} vs {b}" for a, b in zip(mine, theirs) if a != b),
                            f"{len(mine)} parameters vs {len(theirs)}")
                raise ValueError(f"DataParallel: rank {rank}'s model differs from rank "
                                 f"{self.comm.rank}'s (first difference: {diff}); every "
                                 "rank must wrap the same architecture")

    def _broadcast_state(self):
        """Rank 0's parameters and buffers on every rank."""
        if self.comm.size == 1:
            return
        for p in self.module.parameters():
            self.comm.bcast(p.data, 0)
        graph.broadcast_buffers(self.module, self.comm)

    # ----- forward ------------------------------------------------------------------
    def forward(self, *args, **kwargs):
        self._reducer.check_previous_round(self._names)
        recording = get_config().enable_backprop
        if self._join is not None and recording:
            self._join.before_forward()
        if self.broadcast_buffers and self.training and recording and self.comm.size > 1:
            graph.broadcast_buffers(self.module, self.comm, self._join_root())
        t0 = time.perf_counter()
        out = self.module(*args, **kwargs)
        if recording:
            self._reducer.forward_span = (t0, time.perf_counter())
            self._after_forward(out)
        return out

    def _join_root(self):
        return 0 if self._join is None else self._join.authority

    def _after_forward(self, out):
        if self.find_unused_parameters and self._reducer.sync:
            used = graph.reachable_leaves(out)
            self._reducer.begin_round([p for p in self._names if p not in used])
        elif not self._first_forward_checked:
            self._first_forward_checked = True
            used = graph.reachable_leaves(out)
            unused = [n for p, n in self._names.items() if p not in used]
            if unused:
                raise ValueError(
                    f"DataParallel: {len(unused)} parameter(s) are not used to compute the "
                    f"output of forward: {unused[:12]}{' ...' if len(unused) > 12 else ''}; "
                    "their gradients would never be ready and their bucket's all-reduce "
                    "would never start.  Pass find_unused_parameters=True (or set "
                    "requires_grad=False on parameters you do not train)")

    # ----- controls -----------------------------------------------------------------
    @contextlib.contextmanager
    def no_sync(self):
        """Inside, backward accumulates gradients locally without communicating; the first
        synchronised backward after it averages the accumulated sum."""
        previous = self._reducer.sync
        self._reducer.sync = False
        try:
            yield
        finally:
            self._reducer.sync = previous

    def join(self, divide_by_initial_world_size=True):
        """A context manager for uneven inputs: a rank that runs out of batches keeps
        shadowing the others' steps until every rank is done (see ``join.py``)."""
        from lezero.parallel.join import Join
        return Join(self, divide_by_initial_world_size)

    def timeline(self):
        """The ``Timeline`` of the recorded synchronised steps."""
        return self._timeline

    @property
    def buckets(self):
        """[{"index", "params", "bytes", "names"}] per bucket, in launch order (rebuilt
        after the first synchronised step in the order the gradients arrived)."""
        return [b.info() for b in self._reducer.buckets]

    def remove_hooks(self):
        """Unregister the gradient hooks (the model then trains without averaging)."""
        self._reducer.remove()

    def extra_repr(self):
        return (f"comm={self.comm.name!r} ({self.comm.size} ranks), "
                f"{len(self._reducer.buckets)} buckets of <= {self.bucket_mb:g} MiB")
