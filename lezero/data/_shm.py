"""Handing batches from worker processes to the main process through shared memory.

Each worker writes its batches into *slots*, one shared-memory segment each.  To return a
batch the worker stacks every array of it into a slot (``default_collate`` does so
directly, see ``Arena``) and sends the main process only a small description (the
segment's name, and for each array its dtype, shape and offset); the arrays themselves are
never pickled.

The main process keeps every segment mapped and hands the batch to the user as NumPy views
of the slot: no copy at all.  The slot then belongs to the user until every array of that
batch (and every view of one) is gone: all of them rest on one buffer object per batch, its
*lease* (a ``ctypes`` array over the mapping), and a weak reference on the lease tells
``SlotReader`` when it dies.  Only then may the slot carry another batch, so a batch the
user keeps is never overwritten.  A user holding more than ``max_held`` batches of one
worker gets copies instead, which bounds the shared memory in use.  Where POSIX shared
memory cannot be mapped directly (Windows) batches are always copied.

Segments are reused from batch to batch and grow when a batch does not fit.  Their names
are predictable (prefix, worker, slot, generation), so the main process can unlink every
segment at shutdown even if a worker was killed between creating one and reporting it.
"""
import collections
import ctypes
import mmap
import os
import weakref
from multiprocessing import shared_memory

import numpy as np

from lezero.core import Variable

try:                   # how multiprocessing.shared_memory opens segments on POSIX systems
    import _posixshmem
except ImportError:    # Windows: batches are copied out of SharedMemory instead
    _posixshmem = None

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
    """Worker side: owns this worker's segments and writes batches into them.

    The main process names the slot of every batch; a slot number seen for the first time
    gets a segment as large as this worker's largest (batches tend to be alike), so that
    ``default_collate`` can stack even the first batch of a new slot in place.
    """

    def __init__(self, prefix, worker):
        self.prefix, self.worker = prefix, worker
        self.segments = {}        # slot -> SharedMemory
        self.generations = {}     # slot -> generation of its current segment

    def arena(self, slot):
        """An allocator over ``slot`` for building the next batch in place."""
        if slot not in self.segments and self.segments:
            self._new_segment(slot, max(seg.size for seg in self.segments.values()), 1.0)
        return Arena(self.segments.get(slot))

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
            seg = self.segments.get(slot)
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

    def _new_segment(self, slot, nbytes, headroom=1.25):
        # Grow with headroom so that slightly larger batches do not reallocate each time.
        size = max(4096, int(nbytes * headroom))
        _check_free_space(size)
        self.generations[slot] = self.generations.get(slot, -1) + 1
        name = segment_name(self.prefix, self.worker, slot, self.generations[slot])
        self.segments[slot] = shared_memory.SharedMemory(name=name, create=True, size=size)
        return self.segments[slot]

    def close(self):
        """Unlink every segment (the worker is exiting).  A batch the main process still
        shows the user stays readable: unlinking removes the name, not the mapping."""
        for seg in self.segments.values():
            _close(seg, unlink=True)
        self.segments.clear()


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

MAX_HELD = 2   # batches per worker the user may hold as views before getting copies


class SlotReader:
    """Main side: the state of every worker's slots, and batches read out of them.

    A slot is *free*, *building* (sent to its worker with a batch to build; at most
    ``prefetch`` per worker) or *held* (its batch was handed to the user as views of the
    slot).  A held slot becomes free again when the weak reference on its batch's lease
    fires, i.e. when the user has dropped every array of the batch.  Slot numbers are made
    as needed, so a worker has at most ``prefetch + max_held`` slots; while the user holds
    ``max_held`` batches of one worker, that worker's next batches are copied out instead
    (its slot is free at once).
    """

    def __init__(self, prefix, num_workers, prefetch, max_held=MAX_HELD):
        self.prefix = prefix
        self.prefetch, self.max_held = prefetch, max_held
        self.free = [[] for _ in range(num_workers)]
        self.made = [0] * num_workers           # slot numbers handed out so far
        self.building = [0] * num_workers
        self.held = {}                          # (worker, slot) -> weakref to the lease
        self.released = collections.deque()     # (worker, slot) whose lease is gone
        self.mapped = {}                        # (worker, slot) -> (name, buffer)

    # ----- bookkeeping ----------------------------------------------------------------------
    def can_build(self, worker):
        """Whether ``worker`` may be sent another batch (fewer than ``prefetch`` building)."""
        return self.building[worker] < self.prefetch

    def take(self, worker):
        """A free slot of ``worker`` for its next batch, now *building*."""
        self._collect()
        self.building[worker] += 1
        if self.free[worker]:
            return self.free[worker].pop()
        self.made[worker] += 1
        return self.made[worker] - 1

    def discard(self, worker, slot):
        """The batch in ``slot`` is not wanted (an epoch left early): the slot is free."""
        self.building[worker] -= 1
        self.free[worker].append(slot)

    def _hold(self, worker, slot, lease):
        released, key = self.released, (worker, slot)
        # The callback holds the deque, not self: a held batch does not keep the reader.
        self.held[key] = weakref.ref(lease, lambda _, q=released, k=key: q.append(k))

    def _collect(self):
        """Free the slots whose batches the user has dropped since the last call."""
        while self.released:
            worker, slot = key = self.released.popleft()
            if self.held.pop(key, None) is not None:
                self.free[worker].append(slot)

    def _may_share(self, worker):
        self._collect()
        return sum(1 for w, _ in self.held if w == worker) < self.max_held

    # ----- reading --------------------------------------------------------------------------
    def read(self, worker, slot, description):
        """The batch a worker built in ``slot``: views of the slot where possible (the slot
        is then held until the user drops the batch), else arrays copied out of it."""
        lease = None
        try:
            name, meta, tree = description
            if name is None:                      # no arrays: nothing lives in the slot
                return _rebuild(tree, [])
            buf = self._map(worker, slot, name)
            if isinstance(buf, mmap.mmap) and self._may_share(worker):
                # One buffer object per batch: every array below (and every view the user
                # makes of one) keeps it alive, so its death means the batch is gone.
                lease = (ctypes.c_char * len(buf)).from_buffer(buf)
                arrays = [np.ndarray(shape, np.dtype(dtype), buffer=lease, offset=off)
                          for dtype, shape, off in meta]
            else:
                raw = buf if isinstance(buf, mmap.mmap) else buf.buf
                arrays = [np.ndarray(shape, np.dtype(dtype), buffer=raw, offset=off).copy()
                          for dtype, shape, off in meta]
            return _rebuild(tree, arrays)
        finally:
            self.building[worker] -= 1
            if lease is None:
                self.free[worker].append(slot)
            else:
                self._hold(worker, slot, lease)

    def _map(self, worker, slot, name):
        """The main process's mapping of ``name``, kept from batch to batch."""
        hit = self.mapped.get((worker, slot))
        if hit is not None and hit[0] == name:
            return hit[1]
        if hit is not None:          # the worker grew the slot (and unlinked the old one)
            _unmap(hit[1])
        if _posixshmem is not None:
            fd = _posixshmem.shm_open("/" + name, os.O_RDWR, mode=0o600)
            try:
                buf = mmap.mmap(fd, os.fstat(fd).st_size)
            finally:
                os.close(fd)
        else:
            buf = shared_memory.SharedMemory(name=name)
        self.mapped[(worker, slot)] = (name, buf)
        return buf

    def close(self):
        """Unmap everything, then unlink whatever the workers left behind.

        A batch the user still holds keeps its mapping (an exported buffer cannot be
        unmapped) and stays readable; its memory is freed when the user drops it."""
        candidates = []     # for systems where /dev/shm cannot be listed: every name a
        for worker, made in enumerate(self.made):      # slot may have had, and the next
            for slot in range(made):
                hit = self.mapped.get((worker, slot))
                gen = int(hit[0].rpartition("g")[2]) if hit is not None else -1
                candidates += [segment_name(self.prefix, worker, slot, g)
                               for g in (gen, gen + 1) if g >= 0]
        for _, buf in self.mapped.values():
            _unmap(buf)
        self.mapped.clear()
        sweep(self.prefix, candidates)


def _unmap(buf):
    if isinstance(buf, shared_memory.SharedMemory):
        _close(buf, unlink=False)
        return
    try:
        buf.close()
    except BufferError:    # a held batch still views it: unmapped when that batch is gone
        pass


def sweep(prefix, candidates=()):
    """Unlink every segment whose name starts with ``prefix``.

    Where /dev/shm can be listed (Linux) that finds all of them, including a segment a
    killed worker created but never reported.  Elsewhere: the ``candidates`` names.
    """
    names = set(leftover_segments(prefix))
    if not os.path.isdir("/dev/shm"):
        names.update(candidates)
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
