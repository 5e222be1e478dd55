"""The ``Reducer``: DataParallel's gradient hooks, one "round" per synchronised backward.

A round starts at the first gradient hook of a backward (or at the forward, with
``find_unused_parameters``, which marks the unreachable parameters ready up front).  Each
hook copies its parameter's gradient into the bucket; the hook that completes bucket i
starts the all-reduce of every complete bucket from the next one not yet started, so
buckets start in index order on every rank.  Other hooks poll the oldest request in
flight, which keeps MPI's progress engine moving while backward computes.  The hook that
starts the last bucket waits for all of them and writes ``sum / divisor`` back into each
``p.grad``: backward returns with averaged gradients.

The post-accumulate hooks are also what asks the backward engine for complete-gradient
notifications: a backward that reaches a hooked parameter counts the leaf uses still to
come (``lezero.core.backward``), so each hook runs at its parameter's last use while the
engine goes on with earlier layers; a backward that reaches none pays nothing for it.

The bucket all-reduces skip the agreement check (``agree.py``): every rank's buckets have
the same sizes and order by construction (DataParallel checks the replicas and settings
when wrapping; a rebuild takes rank 0's order), and a check would make each bucket's start
wait for every rank, losing the overlap with backward.

After the first round the buckets are rebuilt in the order the gradients arrived (rank
0's order, broadcast, so every rank buckets alike): reverse registration order is only
a guess -- a layer's bias may finish long after its weight -- and a bucket waits for its
slowest member.
"""
import time

import numpy as np

from lezero.parallel.buckets import build_buckets
from lezero.parallel.requests import wait_all


class _Round:
    def __init__(self, buckets, n_params, track_used):
        self.pending = [len(b.params) for b in buckets]
        self.ready = set()
        self.hooked = 0
        self.launched = 0
        self.requests = []
        self.start = [None] * len(buckets)
        self.ready_at = [None] * len(buckets)
        self.first_grad = None
        self.order = []                          # parameters in the order they completed
        self.used = np.ones(n_params, np.int32) if track_used else None
        self.used_request = None


class Reducer:
    """The hook state of one DataParallel (see the module docstring)."""

    def __init__(self, buckets, comm, timeline, find_unused, names, bucket_bytes):
        self.buckets, self.comm, self.timeline = buckets, comm, timeline
        self.find_unused = find_unused
        self.names, self.bucket_bytes = names, bucket_bytes    # {param: name}, cap
        self.sync = True
        self.divisor = comm.size
        self.round = None
        self.forward_span = None
        self.steps = 0
        self.rebuilt = False
        self._index()
        self._handles = [p.register_post_accumulate_grad_hook(self._on_ready)
                         for b in buckets for p in b.params]

    def _index(self):
        self._where = {}
        for b in self.buckets:
            for k, p in enumerate(b.params):
                self._where[p] = (b, k, len(self._where))

    def _rebuild(self, order):
        """Buckets in the order gradients arrived (rank 0's order on every rank)."""
        seen = set(order)
        rest = [p for b in self.buckets for p in b.params if p not in seen]
        names = self.comm.bcast_object([self.names[p] for p in order + rest], 0)
        self.rebuilt = True
        if names == [n for b in self.buckets for n in b.names]:
            return                                   # the guess was right: keep it all
        by_name = {n: p for p, n in self.names.items()}
        self.buckets = build_buckets([(n, by_name[n]) for n in names], self.bucket_bytes,
                                     reverse=False)
        self._index()
        self.timeline.reset([b.info() for b in self.buckets])

    def remove(self):
        for h in self._handles:
            h.remove()
        self._handles = []

    # ----- a round ------------------------------------------------------------------
    def begin_round(self, unused=()):
        """Start a round; ``unused`` parameters are ready at once, holding zeros."""
        r = _Round(self.buckets, len(self._where), self.find_unused)
        for p in unused:
            b, k, i = self._where[p]
            b.zero(k)
            r.ready.add(p)
            r.pending[b.index] -= 1
            r.used[i] = 0
        self.round = r
        return r

    def _on_ready(self, p):
        if not self.sync:
            return
        r = self.round or self.begin_round()
        b, k, i = self._where[p]
        if p in r.ready:
            # A second completion in one backward: an inner backward (recomputation) or a
            # use find_unused_parameters did not see.  Before the bucket starts, the slot
            # simply takes the new total; after, the sent value would be stale.
            if b.index >= r.launched:
                b.copy_in(k)
                if r.used is not None:
                    r.used[i] = 1
                return
            raise RuntimeError(
                f"DataParallel: parameter '{b.names[k]}' received more gradient after its "
                f"bucket's all-reduce had started (its hook ran twice in one backward: is "
                "it used outside the wrapped module's forward, or both inside and outside "
                "a checkpointed segment?); the averaged gradient would be stale")
        now = time.perf_counter()
        if r.first_grad is None:
            r.first_grad = now
        r.hooked += 1
        r.ready.add(p)
        r.order.append(p)
        b.copy_in(k)
        r.pending[b.index] -= 1
        if r.pending[b.index] == 0:
            r.ready_at[b.index] = now
            self._launch(r)
            if r.launched == len(self.buckets):
                self._finish(r)
        elif r.requests:
            for req in r.requests:             # poll the oldest one in flight
                if not req.done:
                    req.test()
                    break

    def _launch(self, r):
        n = len(self.buckets)
        while r.launched < n and r.pending[r.launched] == 0:
            b = self.buckets[r.launched]
            if r.ready_at[b.index] is None:      # complete from the start (all unused)
                r.ready_at[b.index] = time.perf_counter()
            r.start[b.index] = time.perf_counter()
            r.requests.append(self.comm.iallreduce(b.buffer, "sum", out=b.buffer,
                                                   label=f"bucket {b.index} of {n}",
                                                   check=False))
            r.launched += 1
        if r.launched == n and r.used is not None and r.used_request is None:
            r.used_request = self.comm.iallreduce(r.used, "sum", out=r.used,
                                                  label="used-parameter map", check=False)

    def _finish(self, r):
        wait_start = time.perf_counter()
        extra = [] if r.used_request is None else [r.used_request]
        wait_all(r.requests + extra)
        scale = 1.0 / self.divisor
        for b in self.buckets:
            for k, p in enumerate(b.params):
                unused_everywhere = r.used is not None and r.used[self._where[p][2]] == 0
                if not unused_everywhere:
                    b.copy_out(k, scale)
        end = time.perf_counter()
        self.round = None
        self.steps += 1
        self.timeline.record({
            "step": self.steps, "forward": self.forward_span, "first_grad": r.first_grad,
            "last_ready": max(t for t in r.ready_at if t is not None),
            "wait_start": wait_start, "end": end,
            "buckets": [{"ready": r.ready_at[i], "start": r.start[i],
                         "end": req.completed_at} for i, req in enumerate(r.requests)]})
        if not self.rebuilt:
            self._rebuild(r.order)

    def check_previous_round(self, names):
        """Called by forward: a round that saw gradients but never finished means some
        parameters got none -- say which, instead of training on unaveraged gradients."""
        r = self.round
        if r is None:
            return
        self.round = None
        if r.hooked == 0:
            return                            # a forward without backward: nothing started
        wait_all(r.requests)                  # leave no request in flight
        missing = [names[p] for p in names if p not in r.ready]
        raise RuntimeError(
            f"DataParallel: the last backward gave no gradient to {len(missing)} "
            f"parameter(s): {missing[:12]}{' ...' if len(missing) > 12 else ''}; their "
            "buckets were never all-reduced, so that step used unaveraged gradients.  "
            "Pass find_unused_parameters=True if some parameters take no part in some "
            "iterations")

    def shadow(self):
        """Take part in one step of the others with zero gradients (a joined rank)."""
        n = len(self.buckets)
        requests = []
        for b in self.buckets:
            b.buffer[...] = 0
            requests.append(self.comm.iallreduce(b.buffer, "sum", out=b.buffer,
                                                 label=f"bucket {b.index} of {n} (joined)",
                                                 check=False))
        if self.find_unused:
            used = np.zeros(len(self._where), np.int32)
            requests.append(self.comm.iallreduce(used, "sum", out=used,
                                                 label="used-parameter map (joined)",
                                                 check=False))
        wait_all(requests)
        if not self.rebuilt:          # as the active ranks do after their first round
            self._rebuild([])
