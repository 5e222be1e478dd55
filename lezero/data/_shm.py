"""Handing batches from worker processes to the main process through shared memory.

Each worker owns ``prefetch_factor`` *slots*, one shared-memory segment each.  To return a
batch the worker copies every array of it into a slot and sends the main process only a
small description (the segment's name, and for each array its dtype, shape and offset);
the arrays themselves are never pickled.  The main process copies the arrays out of the
slot (one ``memcpy`` each) before the slot is given back to the worker for a later batch,
so a batch the user keeps is never overwritten.

Segments are reused from batch to batch and grow when a batch does not fit.  Their names
are predictable (prefix, worker, slot, generation), so the main process can unlink every
segment at shutdown even if a worker was killed between creating one and reporting it.
"""
import os
from multiprocessing import shared_memory

import numpy as np

from lezero.core import Variable

_ALIGN = 64            # start every array on a cache line


def segment_name(prefix, worker, slot, generation):
    """The name of a slot's segment (short: macOS allows 31 characters)."""
    return f"{prefix}w{worker}s{slot}g{generation}"


def new_prefix():
    """A prefix unique to one loader iterator: ``lz`` + pid + random hex."""
    return f"lz{os.getpid():x}_{os.urandom(3).hex()}_"


# ----- describing a batch ------------------------------------------------------------------
# A batch is a tree of tuples, lists, dicts and leaves.  ``_flatten`` replaces each
# numeric array with ("a", index) and records the array; anything else stays in the tree
# as it is (and is pickled with the description: strings, Python numbers, object arrays).

def _flatten(obj, arrays):
    if isinstance(obj, np.ndarray) and not obj.dtype.hasobject:
        arrays.append(obj)
        return ("a", len(arrays) - 1)
    if isinstance(obj, Variable) and isinstance(obj.data, np.ndarray):
        arrays.append(obj.data)
        return ("v", len(arrays) - 1, obj.name)
    if type(obj) in (tuple, list):
        return ("t" if type(obj) is tuple else "l", [_flatten(x, arrays) for x in obj])
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return ("n", type(obj), [_flatten(x, arrays) for x in obj])
    if isinstance(obj, dict):
        return ("d", type(obj), [(k, _flatten(v, arrays)) for k, v in obj.items()])
    return ("o", obj)


def _rebuild(node, arrays):
    kind = node[0]
    if kind == "a":
        return arrays[node[1]]
    if kind == "v":
        return Variable(arrays[node[1]], name=node[2], requires_grad=False)
    if kind == "t":
        return tuple(_rebuild(x, arrays) for x in node[1])
    if kind == "l":
        return [_rebuild(x, arrays) for x in node[1]]
    if kind == "n":
        return node[1](*(_rebuild(x, arrays) for x in node[2]))
    if kind == "d":
        return node[1]((k, _rebuild(v, arrays)) for k, v in node[2])
    return node[1]


def _align(offset):
    return -(-offset // _ALIGN) * _ALIGN


def _layout(arrays):
    """Offsets of each array in a segment, and the total size."""
    offsets, end = [], 0
    for a in arrays:
        offsets.append(_align(end))
        end = offsets[-1] + a.nbytes
    return offsets, end


# ----- worker side -----------------------------------------------------------------------

class Arena:
    """A bump allocator over a slot's segment, for ``collate_into``: ``default_collate``
    stacks a batch straight into shared memory, and ``SlotWriter.write`` then finds those
    arrays already in place.  When the segment is missing or full it hands out ordinary
    arrays, which ``write`` copies (into a larger segment, used from then on)."""

    def __init__(self, segment):
        self.segment = segment
        self.top = 0
        self.owned = {}           # id(array) -> (array, offset); holding it keeps ids unique

    def alloc(self, shape, dtype):
        dtype = np.dtype(dtype)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        offset = _align(self.top)
        if self.segment is None or dtype.hasobject or offset + nbytes > self.segment.size:
            return np.empty(shape, dtype)
        a = np.ndarray(shape, dtype, buffer=self.segment.buf, offset=offset)
        self.top = offset + nbytes
        self.owned[id(a)] = (a, offset)
        return a

    def offset_of(self, a):
        hit = self.owned.get(id(a))
        return hit[1] if hit is not None and hit[0] is a else None


class SlotWriter:
    """Worker side: owns this worker's segments and writes batches into them."""

    def __init__(self, prefix, worker, num_slots):
        self.prefix, self.worker = prefix, worker
        self.segments = [None] * num_slots
        self.generations = [-1] * num_slots

    def arena(self, slot):
        """An allocator over ``slot`` for building the next batch in place."""
        return Arena(self.segments[slot])

    def write(self, slot, batch, arena=None):
        """Put the arrays of ``batch`` into ``slot`` (those built in ``arena`` are there
        already); returns the description to send to the main process."""
        arrays = []
        tree = _flatten(batch, arrays)
        offsets, end = [], arena.top if arena is not None else 0
        for a in arrays:      # arrays from the arena stay; the others go after them
            off = arena.offset_of(a) if arena is not None else None
            if off is None:
                off = _align(end)
                end = off + a.nbytes
            offsets.append(off)
        name = None
        if arrays:
            seg = self.segments[slot]
            if seg is None or end > seg.size:
                # Does not fit: lay everything out afresh in a larger segment.  The old one
                # is unlinked only after the copy, as arena arrays still live in it.
                offsets, total = _layout(arrays)
                old, seg = seg, self._new_segment(slot, total)
                self._copy(seg, arrays, offsets, None)
                if old is not None:
                    _close(old, unlink=True)    # the main process maps it until it sees
            else:                               # the new name
                self._copy(seg, arrays, offsets, arena)
            name = seg.name
        meta = [(a.dtype.str, a.shape, off) for a, off in zip(arrays, offsets)]
        return (name, meta, tree)

    @staticmethod
    def _copy(seg, arrays, offsets, arena):
        for a, off in zip(arrays, offsets):
            if arena is not None and arena.offset_of(a) is not None:
                continue
            dst = np.ndarray(a.shape, a.dtype, buffer=seg.buf, offset=off)
            np.copyto(dst, a, casting="no")

    def _new_segment(self, slot, nbytes):
        # Grow with headroom so that slightly larger batches do not reallocate each time.
        size = max(4096, int(nbytes * 1.25))
        _check_free_space(size)
        self.generations[slot] += 1
        name = segment_name(self.prefix, self.worker, slot, self.generations[slot])
        self.segments[slot] = shared_memory.SharedMemory(name=name, create=True, size=size)
        return self.segments[slot]

    def close(self):
        """Unlink every segment (the worker is exiting; the main process copied them)."""
        for seg in self.segments:
            if seg is not None:
                _close(seg, unlink=True)
        self.segments = [None] * len(self.segments)


def _check_free_space(size):
    """Fail with a clear message instead of a SIGBUS when /dev/shm is too small."""
    try:
        st = os.statvfs("/dev/shm")
    except OSError:
        return
    free = st.f_bavail * st.f_frsize
    if size > free:
        raise MemoryError(f"DataLoader: a batch needs {size / 2**20:.1f} MiB of shared memory "
                          f"but /dev/shm has {free / 2**20:.1f} MiB free; lower batch_size "
                          f"or prefetch_factor, or enlarge /dev/shm")


def _close(seg, unlink):
    try:
        seg.close()
    except (BufferError, OSError):
        pass
    if unlink:
        try:
            seg.unlink()
        except FileNotFoundError:
            pass


# ----- main side ---------------------------------------------------------------------------

class SlotReader:
    """Main side: maps the workers' segments and copies batches out of them."""

    def __init__(self, prefix):
        self.prefix = prefix
        self.mapped = {}        # (worker, slot) -> SharedMemory

    def read(self, worker, slot, description):
        """Rebuild the batch described by a worker, as arrays the main process owns."""
        name, meta, tree = description
        arrays = []
        if name is not None:
            seg = self.mapped.get((worker, slot))
            if seg is None or seg.name != name:
                if seg is not None:
                    _close(seg, unlink=False)     # the worker unlinked it when it grew
                seg = shared_memory.SharedMemory(name=name)
                self.mapped[(worker, slot)] = seg
            for dtype, shape, off in meta:
                view = np.ndarray(shape, np.dtype(dtype), buffer=seg.buf, offset=off)
                arrays.append(view.copy())
        return _rebuild(tree, arrays)

    def close(self):
        """Unmap everything, then unlink whatever the workers left behind."""
        known = [seg.name for seg in self.mapped.values()]
        for seg in self.mapped.values():
            _close(seg, unlink=False)
        self.mapped.clear()
        sweep(self.prefix, known)


def sweep(prefix, known=()):
    """Unlink every segment whose name starts with ``prefix``.

    Where /dev/shm can be listed (Linux) that finds all of them, including a segment a
    killed worker created but never reported.  Elsewhere: the names last seen and their
    next generation (a worker creates at most one segment per slot before reporting it).
    """
    names = set(leftover_segments(prefix))
    if not os.path.isdir("/dev/shm"):
        for name in known:
            head, _, gen = name.rpartition("g")
            names.update((name, f"{head}g{int(gen) + 1}"))
    for name in names:
        try:
            seg = shared_memory.SharedMemory(name=name)
        except (FileNotFoundError, ValueError):
            continue
        _close(seg, unlink=True)


def leftover_segments(prefix):
    """Names in /dev/shm that start with ``prefix`` (for tests and diagnostics)."""
    try:
        return sorted(n for n in os.listdir("/dev/shm") if n.startswith(prefix))
    except FileNotFoundError:
        return []
