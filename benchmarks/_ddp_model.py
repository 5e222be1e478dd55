"""The cost model of a data-parallel step: compute, an alpha-beta all-reduce, and overlap.

An all-reduce of ``n`` bytes over ``p`` ranks by the ring algorithm sends ``2 (p-1)``
messages of ``n / p`` bytes in sequence, so it costs

    t(n, p) = 2 (p - 1) * alpha  +  2 (p - 1) / p * n * beta

with ``alpha`` the latency of one message and ``beta`` the inverse bandwidth (s/byte).
``fit`` gets both from measured times on ``p`` ranks.

A step: backward produces bucket i's gradients at ``ready[i]`` (seconds after backward
starts); each bucket's all-reduce starts when it is ready and the previous one is done
(one link, used by one transfer at a time), so the step ends at
``max(compute, last all-reduce end)`` plus the optimizer.  ``step_time`` evaluates that
schedule; with ``overlap=False`` all communication follows the backward.
"""
import numpy as np


def fit(sizes, seconds, ranks, small_max=64, large_min=2 ** 18):
    """(alpha, beta) from all-reduce times measured for message ``sizes`` (bytes).

    One straight line fits badly across eight decades (MPI switches protocols between
    small and large messages), so the two terms are fitted where each dominates: alpha
    from the messages of at most ``small_max`` bytes (latency only), beta by least
    squares on the messages of at least ``large_min`` bytes with that alpha held."""
    sizes, seconds = np.asarray(sizes, float), np.asarray(seconds, float)
    alpha = float(np.min(seconds[sizes <= small_max])) / (2 * (ranks - 1))
    big = sizes >= large_min
    n, t = sizes[big], seconds[big]
    w = 1.0 / t ** 2                                    # minimise sum ((model - t) / t)^2
    slope = float(np.sum(w * n * (t - 2 * (ranks - 1) * alpha)) / np.sum(w * n * n))
    beta = max(slope, 0.0) / (2 * (ranks - 1) / ranks)
    return alpha, beta


def allreduce_time(nbytes, ranks, alpha, beta):
    """The ring all-reduce's time for ``nbytes`` on ``ranks`` ranks."""
    if ranks == 1:
        return 0.0
    return 2 * (ranks - 1) * alpha + 2 * (ranks - 1) / ranks * nbytes * beta


def step_time(forward, backward, optimizer, ready, nbytes, ranks, alpha, beta,
              overlap=True):
    """Predicted seconds of one data-parallel step (see the module docstring).

    ``ready``: per bucket, seconds after backward starts at which its gradients are
    complete (launch order); ``nbytes``: per bucket, its size."""
    costs = [allreduce_time(n, ranks, alpha, beta) for n in nbytes]
    return schedule(forward, backward, optimizer, ready, costs, overlap)


def schedule(forward, backward, optimizer, ready, costs, overlap=True):
    """The step's length when bucket i (ready at ``ready[i]``) takes ``costs[i]`` seconds
    and the all-reduces run one after another (after backward when not ``overlap``)."""
    end = 0.0
    for r, c in zip(ready, costs):
        end = max(r if overlap else backward, end) + c
    return forward + max(backward, end) + optimizer


def uniform_ready(backward, nbytes):
    """Bucket ready times if backward produced gradients at a steady rate (by bytes)."""
    total = float(sum(nbytes))
    done, out = 0.0, []
    for n in nbytes:
        done += n
        out.append(backward * done / total)
    return out


def efficiency(compute, comm_total, overlap_fraction, backward):
    """Data-parallel efficiency: single-rank step time over the parallel step time, when
    ``overlap_fraction`` of the communication hides behind the backward (at most the
    backward's length)."""
    hidden = min(overlap_fraction * comm_total, backward)
    return compute / (compute + comm_total - hidden)


def buckets(total_bytes, bucket_mb):
    """The bucket sizes DataParallel would make of ``total_bytes`` of gradients."""
    cap = bucket_mb * 2 ** 20
    full = int(total_bytes // cap)
    rest = total_bytes - full * cap
    return [cap] * full + ([rest] if rest else [])


def project(params, grad_bytes_per_param, compute_s, backward_share, nodes, alpha, beta,
            bucket_mb=25.0, overlap=True):
    """Efficiency of a step of ``compute_s`` seconds (forward + backward + optimizer,
    ``backward_share`` of it the backward) on ``nodes`` nodes, for a model of ``params``
    parameters whose gradients are all-reduced in buckets of ``bucket_mb`` MiB."""
    nbytes = buckets(params * grad_bytes_per_param, bucket_mb)
    backward = backward_share * compute_s
    forward = compute_s - backward
    ready = uniform_ready(backward, nbytes)
    t = step_time(forward, backward, 0.0, ready, nbytes, nodes, alpha, beta, overlap)
    return compute_s / t, t
