"""``vocab_parallel_cross_entropy``: the cross entropy of vocabulary-split logits, never
gathering them.

Each rank holds the logits of its slice of the vocabulary, ``z_r`` of shape (..., V/size).
With ``m`` the row maximum over the whole vocabulary,

    loss = log sum_j exp(z_j - m) + m  -  (1 - eps) z_target  -  (eps / V) sum_j z_j

(label smoothing ``eps`` mixes the target with the uniform distribution over the ``V``
real classes, as ``F.cross_entropy``).  Every sum over the vocabulary is a local sum
followed by one all-reduce: one for the maximum (a constant: the loss does not depend on
it), one for the three packed per-row sums -- never a (..., V) array.  The packed sums go
through ``reduce_from_parallel_region`` (all-reduce forward, identity backward), so the
gradient of each rank's slice is local: ``softmax - (1 - eps) onehot - eps / V``, and the
whole loss is ordinary differentiable operators (double backward included).

Padding: logits of the padded vocabulary entries (``vocab_size`` below the padded size)
are excluded from every sum, so they get a zero gradient and the loss equals the dense
loss over the real vocabulary exactly.
"""
import time

import numpy as np

import lezero.functions as F
from lezero import cuda
from lezero.core import Variable, as_variable
from lezero.parallel import accounting
from lezero.parallel.collectives import reduce_from_parallel_region
from lezero.parallel.tensor.sharding import tp_comm
from lezero.utils.checks import check_array, check_choice, check_int, check_number

WHERE = "parallel.vocab_parallel_cross_entropy"


def _checked(logits_shard, target, comm, vocab_size, ignore_index):
    z = logits_shard if isinstance(logits_shard, Variable) else \
        as_variable(check_array(WHERE, "logits_shard", logits_shard))
    if z.ndim < 1 or z.dtype.kind != "f":
        raise TypeError(f"{WHERE}: logits_shard must be floating point with the vocabulary "
                        f"on the last axis, got {z.dtype} of shape {tuple(z.shape)}")
    t = check_array(WHERE, "target", target)
    if t.dtype.kind not in "iu":
        raise TypeError(f"{WHERE}: target must hold integer class indices, got {t.dtype}")
    if tuple(t.shape) != tuple(z.shape[:-1]):
        raise ValueError(f"{WHERE}: target has shape {tuple(t.shape)}, expected the logits' "
                         f"shape without the vocabulary axis, {tuple(z.shape[:-1])}")
    padded = z.shape[-1] * comm.size
    vocab = padded if vocab_size is None else check_int(WHERE, "vocab_size", vocab_size, 1,
                                                        padded)
    ignore_index = check_int(WHERE, "ignore_index", ignore_index)
    valid = t != ignore_index
    bad = valid & ((t < 0) | (t >= vocab))
    if bool(bad.any()):
        raise ValueError(f"{WHERE}: target {int(t[bad].ravel()[0])} is out of range for a "
                         f"vocabulary of {vocab} (and is not ignore_index={ignore_index})")
    return z, t, vocab, valid


def vocab_parallel_cross_entropy(logits_shard, target, comm=None, label_smoothing=0.0,
                                 reduction="mean", vocab_size=None, ignore_index=-100):
    """Cross entropy of logits split along the vocabulary (the last axis) over the ranks
    of ``comm``; equals ``F.cross_entropy`` of the full logits (flattened to (N, V)).

    ``vocab_size``: the real vocabulary when the shards are padded (default: all columns
    are real).  ``label_smoothing``, ``reduction`` ("mean", "sum", "none") and
    ``ignore_index`` are ``F.cross_entropy``'s."""
    comm = tp_comm(comm, WHERE)
    reduction = check_choice(WHERE, "reduction", reduction, ("mean", "sum", "none"))
    eps = check_number(WHERE, "label_smoothing", label_smoothing, 0.0, 1.0)
    z, t, vocab, valid = _checked(logits_shard, target, comm, vocab_size, ignore_index)
    with accounting.scope("vocab_parallel_cross_entropy"):
        per_row = _per_row_loss(z, t, valid, comm, vocab, eps)
    if reduction == "none":
        return per_row.reshape(t.shape)
    total = F.sum(per_row)
    if reduction == "sum":
        return total
    count = int(valid.sum())
    return total * (1.0 / count) if count else total * float("nan")


def _per_row_loss(z, t, valid, comm, vocab, eps):
    xp = cuda.get_array_module(z.data)
    width = z.shape[-1]
    n = int(np.prod(z.shape[:-1], dtype=np.int64))
    z2, t2, valid = z.reshape(n, width), t.reshape(n), valid.reshape(n)
    start = comm.rank * width
    real = int(min(max(vocab - start, 0), width))         # this rank's real columns
    dtype = z.dtype
    local_max = z2.data[:, :real].max(axis=1) if real else xp.full(n, -np.inf, dtype)
    began = time.perf_counter()
    m = comm.allreduce(xp.ascontiguousarray(local_max), "max").astype(dtype)
    accounting.record(accounting.current_scope(), "forward", "allreduce", comm,
                      local_max.nbytes, time.perf_counter() - began)
    shifted = z2 - m[:, None]
    if real < width:                                       # padded columns: exp(-inf) = 0
        penalty = xp.zeros(width, dtype)
        penalty[real:] = -np.inf
        shifted = shifted + penalty
    sums = [F.sum(F.exp(shifted), axis=1)]
    mine = valid & (t2 >= start) & (t2 < start + real)
    column = xp.where(mine, t2 - start, 0)
    sums.append(z2[xp.arange(n), column] * mine.astype(dtype))
    if eps:
        realmask = (xp.arange(width) < real).astype(dtype)
        sums.append(F.sum(z2 * realmask, axis=1))
    packed = reduce_from_parallel_region(F.stack(sums, axis=1), comm)
    loss = F.log(packed[:, 0]) + m - (1.0 - eps) * packed[:, 1]
    if eps:
        loss = loss - (eps / vocab) * packed[:, 2]
    return loss * valid.astype(dtype)
