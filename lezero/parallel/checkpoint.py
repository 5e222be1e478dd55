"""Checkpoints under data parallelism: rank 0 writes, every rank resumes identically.

    parallel.save_checkpoint("ck.npz", {"model": dp.module.state_dict(),
                                        "optimizer": opt.state_dict(), "epoch": e})
    state = parallel.load_checkpoint("ck.npz")      # the same object on every rank

``save_checkpoint`` is collective: rank 0 writes the file atomically (``lz.save`` goes
through ``atomic_write``: a crash leaves the previous checkpoint intact) and the others
wait at a barrier until the file is complete, so a ``load`` right after never sees a
partial file.  With ``rng=True`` each rank's LeZero generator state is gathered into the
file and restored on its own rank by ``load_checkpoint`` (dropout masks continue as if
uninterrupted).  ``load_checkpoint`` reads on rank 0 only and broadcasts -- the
skeleton as a Python object, every array through the buffer API -- so the ranks need not
share a file system and resume bit-identical.
"""
import numpy as np

from lezero.random import get_rng_state as _rng_state, set_rng_state as _set_rng_state

_RNG_KEY = "__rng_per_rank__"


def _world(comm):
    from lezero.parallel.world import resolve
    return resolve(comm)


def save_checkpoint(path, state, comm=None, rng=False):
    """Collective: rank 0 writes ``state`` (anything ``lz.save`` takes) to ``path``."""
    import lezero as lz
    from lezero.utils.checks import check_bool, check_type
    comm = _world(comm)
    check_type("parallel.save_checkpoint", "state", state, dict)
    rng = check_bool("parallel.save_checkpoint", "rng", rng)
    if rng:
        states = comm.allgather_object(_rng_state())
        state = dict(state, **{_RNG_KEY: states})
    error = None
    if comm.rank == 0:
        try:
            lz.save(state, path)
        except Exception as e:        # tell the other ranks instead of leaving them waiting
            error = e
    failed = comm.bcast_object(None if error is None else repr(error), 0)
    if error is not None:
        raise error
    if failed is not None:
        raise RuntimeError(f"parallel.save_checkpoint: rank 0 could not write {path!r}: "
                           f"{failed}")
    return path


def load_checkpoint(path, comm=None):
    """Collective: ``lz.load(path)`` on rank 0, the identical object on every rank."""
    import lezero as lz
    from lezero.utils.serialization import flatten, unflatten
    comm = _world(comm)
    header = error = None
    if comm.rank == 0:
        try:
            skeleton, arrays = flatten(lz.load(path))
            names = sorted(arrays)
            header = (skeleton, [(n, arrays[n].shape, arrays[n].dtype) for n in names])
        except Exception as e:
            error = e
    sent = comm.bcast_object(header if error is None else ("error", repr(error)), 0)
    if error is not None:
        raise error
    if sent[0] == "error":
        raise RuntimeError(f"parallel.load_checkpoint: rank 0 could not read {path!r}: "
                           f"{sent[1]}")
    skeleton, meta = sent
    received = {}
    for name, shape, dtype in meta:
        buf = arrays[name] if comm.rank == 0 else np.empty(shape, dtype)
        received[name] = comm.bcast(np.array(buf, order="C"), 0)   # keeps 0-d arrays 0-d
    state = unflatten(skeleton, received, where="parallel.load_checkpoint")
    if isinstance(state, dict) and _RNG_KEY in state:
        states = state.pop(_RNG_KEY)
        if len(states) == comm.size:
            _set_rng_state(states[comm.rank])
    return state
