"""``Timeline``: when each bucket's gradients were ready, and when its all-reduce ran.

DataParallel records one entry per synchronised backward: the forward's span, the first
and the last gradient's arrival (the backward window in which communication can hide),
and for each bucket the moments it became ready, its all-reduce started and was seen
complete.  Completion is observed when LeZero polls MPI (at every gradient hook and in
the final wait), so an end time is late by at most the gap between two polls.

* ``overlap_fraction()``: the share of communication time that fell inside the
  backward window (the union of all-reduce intervals, intersected with the window);
* ``summary()``: a text table per bucket, averaged over the recorded steps;
* ``to_chrome_trace(path, comm=None)``: a Chrome-trace JSON (chrome://tracing, Perfetto);
  with ``comm`` every rank's events are gathered and rank 0 writes one file.
"""
import json
from collections import deque

from lezero.parallel.wire import nbytes_text


def _union(intervals):
    """Total length of the union of (start, end) intervals, and the merged list."""
    merged = []
    for s, e in sorted(intervals):
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    return sum(e - s for s, e in merged), merged


def step_overlap(step):
    """(communication seconds, overlapped seconds) of one recorded step."""
    spans = [(b["start"], b["end"]) for b in step["buckets"] if b["end"] is not None]
    total, merged = _union(spans)
    lo, hi = step["first_grad"], step["last_ready"]
    inside = sum(max(0.0, min(e, hi) - max(s, lo)) for s, e in merged)
    return total, inside


class Timeline:
    """The recorded steps of one DataParallel (the last ``max_steps`` of them)."""

    def __init__(self, buckets, rank, size, epoch, bucket_cap, max_steps=200):
        self.buckets = buckets          # [{"index", "params", "bytes", "names"}]
        self.rank, self.size, self.epoch, self.bucket_cap = rank, size, epoch, bucket_cap
        self.steps = deque(maxlen=max_steps)

    def record(self, step):
        self.steps.append(step)

    def reset(self, buckets):
        """New bucket layout (after the rebuild): forget the steps of the old one."""
        self.buckets = buckets
        self.steps.clear()

    def __len__(self):
        return len(self.steps)

    def overlap_fraction(self):
        """Communication time inside the backward window / all communication time,
        over the recorded steps (0.0 when nothing was communicated)."""
        total = inside = 0.0
        for step in self.steps:
            t, i = step_overlap(step)
            total, inside = total + t, inside + i
        return inside / total if total > 0 else 0.0

    def averages(self):
        """Per step means in seconds: backward window, communication, exposed wait."""
        n = max(len(self.steps), 1)
        backward = sum(s["last_ready"] - s["first_grad"] for s in self.steps) / n
        comm = sum(step_overlap(s)[0] for s in self.steps) / n
        exposed = sum(s["end"] - s["last_ready"] for s in self.steps) / n
        return {"backward_s": backward, "communication_s": comm, "exposed_s": exposed,
                "overlap_fraction": self.overlap_fraction()}

    def summary(self):
        """A text table: per bucket, times in ms after the step's first gradient."""
        lines = [f"DataParallel timeline: rank {self.rank} of {self.size}, "
                 f"{len(self.buckets)} buckets (cap {nbytes_text(self.bucket_cap)}), "
                 f"{len(self.steps)} steps recorded"]
        if not self.steps:
            return lines[0] + " (no synchronised backward yet)"
        lines.append(f"{'bucket':>6} {'params':>6} {'size':>10} {'ready ms':>9} "
                     f"{'start ms':>9} {'end ms':>9} {'allreduce ms':>13}")
        n = len(self.steps)
        for k, info in enumerate(self.buckets):
            rel = [sum(s["buckets"][k][key] - s["first_grad"] for s in self.steps) / n * 1e3
                   for key in ("ready", "start", "end")]
            lines.append(f"{k:>6} {info['params']:>6} {nbytes_text(info['bytes']):>10} "
                         f"{rel[0]:>9.2f} {rel[1]:>9.2f} {rel[2]:>9.2f} "
                         f"{rel[2] - rel[1]:>13.2f}")
        a = self.averages()
        lines.append(f"per step: backward window {a['backward_s'] * 1e3:.2f} ms, "
                     f"communication {a['communication_s'] * 1e3:.2f} ms, "
                     f"{a['overlap_fraction']:.0%} of it overlapped with backward, "
                     f"exposed {a['exposed_s'] * 1e3:.2f} ms after the last gradient")
        return "\n".join(lines)

    def events(self):
        """This rank's Chrome-trace events (microseconds since the wrap)."""
        def us(t):
            return round((t - self.epoch) * 1e6, 1)
        pid = self.rank
        ev = [{"name": "process_name", "ph": "M", "pid": pid, "args": {"name": f"rank {pid}"}},
              {"name": "thread_name", "ph": "M", "pid": pid, "tid": 0,
               "args": {"name": "compute"}},
              {"name": "thread_name", "ph": "M", "pid": pid, "tid": 1,
               "args": {"name": "all-reduce"}}]

        def span(name, tid, a, b, **args):
            ev.append({"name": name, "ph": "X", "pid": pid, "tid": tid, "ts": us(a),
                       "dur": round((b - a) * 1e6, 1), "args": args})

        for step in self.steps:
            if step.get("forward") is not None:
                span("forward", 0, *step["forward"], step=step["step"])
            span("backward", 0, step["first_grad"], step["last_ready"], step=step["step"])
            span("wait", 0, step["wait_start"], step["end"], step=step["step"])
            for k, b in enumerate(step["buckets"]):
                ev.append({"name": f"bucket {k} ready", "ph": "i", "s": "t", "pid": pid,
                           "tid": 0, "ts": us(b["ready"])})
                span(f"all-reduce bucket {k}", 1, b["start"], b["end"],
                     bytes=self.buckets[k]["bytes"], params=self.buckets[k]["params"])
        return ev

    def to_chrome_trace(self, path=None, comm=None):
        """The trace as a dict; written to ``path`` (atomically) when given.  With
        ``comm`` (collective: every rank calls) all ranks' events go into rank 0's file."""
        events = self.events()
        if comm is not None and comm.size > 1:
            events = [e for part in comm.allgather_object(events) for e in part]
            if comm.rank != 0:
                return {"traceEvents": events, "displayTimeUnit": "ms"}
        trace = {"traceEvents": events, "displayTimeUnit": "ms"}
        if path is not None:
            from lezero.utils.files import atomic_write
            atomic_write(path, json.dumps(trace), where="Timeline.to_chrome_trace")
        return trace

    def __repr__(self):
        return f"<Timeline rank {self.rank}: {len(self.steps)} steps, " \
               f"{len(self.buckets)} buckets>"
