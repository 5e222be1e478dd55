"""``SyncBatchNorm``: batch normalization over the global batch of all ranks.

With data parallelism each rank sees only its shard of the batch; plain BatchNorm would
normalise with shard statistics, so k ranks would not train like one process.
SyncBatchNorm gathers every rank's per-channel (mean, M2, count) -- M2 is the sum of
squared deviations, combined as Chan et al.'s parallel variance, which stays exact where
``E[x^2] - E[x]^2`` loses digits -- with one differentiable ``all_gather``, so its backward
(a reduce-scatter) carries the gradients of the statistics back to every rank.  Running
statistics are updated from the global mean and unbiased variance, exactly as one process
with the whole batch would.  In eval mode, or alone, it is plain ``BatchNorm``.

    model = parallel.convert_sync_batchnorm(model)   # every BatchNorm{1,2,3}d converted
"""
import lezero.functions as F
from lezero import cuda, nn
from lezero.core import no_grad
from lezero.nn.layers.normalization import BatchNormBase
from lezero.parallel.collectives import all_gather


class SyncBatchNorm(BatchNormBase):
    """``torch.nn.SyncBatchNorm``: BatchNorm of (N, C, *) inputs whose training-mode
    statistics span every rank of ``comm`` (default: the world)."""

    shape_text = "(N, C, ...)"

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, comm=None):
        super().__init__(num_features, eps, momentum, affine, track_running_stats)
        from lezero.parallel.world import resolve
        self.comm = None if comm is None else resolve(comm, "SyncBatchNorm")

    def _check_rank(self, x):
        if x.ndim < 2:
            raise ValueError(f"SyncBatchNorm: expected an (N, C, ...) input, got shape "
                             f"{x.shape}")

    def forward(self, input):
        from lezero.parallel.world import get_world
        comm = self.comm or get_world()
        if not self.training or comm.size == 1:
            return super().forward(input)
        self._check_input(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.track_running_stats:
            self.num_batches_tracked += 1
            if self.momentum is None:      # cumulative moving average, as in PyTorch
                factor = 1.0 / float(self.num_batches_tracked)
        return _sync_batch_norm(input, self, comm, factor)

    @classmethod
    def convert_sync_batchnorm(cls, module, comm=None):
        """``torch.nn.SyncBatchNorm.convert_sync_batchnorm``; see the function."""
        return convert_sync_batchnorm(module, comm)


def _sync_batch_norm(x, bn, comm, factor):
    C = x.shape[1]
    axes = (0,) + tuple(range(2, x.ndim))
    shape = (1, C) + (1,) * (x.ndim - 2)
    xp = cuda.get_array_module(x)
    count = x.size // C
    mean_l = F.mean(x, axis=axes)                               # this rank's statistics
    dev = x - mean_l.reshape(shape)
    m2_l = F.sum(dev * dev, axis=axes)
    n_l = xp.full((1,), count, dtype=mean_l.dtype)
    gathered = all_gather(F.concatenate([mean_l, m2_l, n_l]), axis=None, comm=comm)
    counts = gathered.data[:, 2 * C:]                           # (ranks, 1), constants
    total = float(counts.sum())
    means, m2s = gathered[:, :C], gathered[:, C:2 * C]
    mean = F.sum(means * counts, axis=0) / total
    gap = means - mean
    var = F.sum(m2s + counts * gap * gap, axis=0) / total       # biased, for normalising
    if bn.track_running_stats:
        with no_grad():
            unbiased = var.data * (total / max(total - 1.0, 1.0))
            for buf, new in ((bn.running_mean, mean.data), (bn.running_var, unbiased)):
                buf[...] = (1.0 - factor) * buf + factor * new.astype(buf.dtype)
    y = (x - mean.reshape(shape)) * F.rsqrt(var.reshape(shape) + bn.eps)
    if bn.weight is not None:
        y = y * bn.weight.reshape(shape)
    if bn.bias is not None:
        y = y + bn.bias.reshape(shape)
    return y


def _batch_norm_types():
    return (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)


def convert_sync_batchnorm(module, comm=None):
    """Replace every ``BatchNorm1d/2d/3d`` inside ``module`` by a ``SyncBatchNorm`` that
    shares its parameters and running statistics (the same objects, so optimizers built
    before keep working); returns the module (a new one if ``module`` itself is a
    BatchNorm).  Children keep their places, so parameter order is unchanged."""
    if isinstance(module, _batch_norm_types()) and not isinstance(module, SyncBatchNorm):
        sync = SyncBatchNorm(module.num_features, module.eps, module.momentum,
                             module.affine, module.track_running_stats, comm)
        for name in ("weight", "bias"):
            sync._parameters[name] = module._parameters.get(name)
        for name in ("running_mean", "running_var", "num_batches_tracked"):
            sync._buffers[name] = module._buffers.get(name)
        sync.train(module.training)
        return sync
    if not isinstance(module, nn.Module):
        raise TypeError(f"convert_sync_batchnorm: module must be an nn.Module, got "
                        f"{type(module).__name__}")
    for name, child in list(module._modules.items()):
        if child is not None:
            module._modules[name] = convert_sync_batchnorm(child, comm)   # same position
    return module


__all__ = ["SyncBatchNorm", "convert_sync_batchnorm"]
