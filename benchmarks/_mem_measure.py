"""One training step's memory, measured the way each framework allows.

LeZero (NumPy reports every array buffer to ``tracemalloc``):

* ``kept``: tracemalloc's current traced memory after ``loss = fwd()`` minus before (the
  model, the batch and a warm step already there, the parameters' grads None);
* ``peak``: tracemalloc's peak over forward and backward (``reset_peak`` before forward),
  minus the same start; the parameters' new gradients are part of it;
* ``lz``: what ``lz.memory.profile`` counts as kept by the graph after the same forward
  (a second, separate forward): its saved bytes minus the model's own parameters, i.e. the
  activations plus autocast's low-precision copies of the parameters.

PyTorch (no tracemalloc):

* ``kept``: the storages autograd saves for backward, through
  ``torch.autograd.graph.saved_tensors_hooks`` (``TorchSaved`` of bench_checkpoint.py: each
  storage once, parameters and autocast's copies of them excluded, also a copy saved
  through a view), after forward; ``copies``: the bytes of those copies it left out;
* ``peak``: ``torch.profiler.profile(profile_memory=True)``: every allocation and free of
  PyTorch's CPU allocator during forward and backward, summed in time order; the peak of
  that running sum.  Frees of blocks allocated before the profiler started are not
  reported (PyTorch warns), so the sum counts only what the step itself allocates.
"""
import gc
import tracemalloc

from bench_checkpoint import TorchSaved


def warm(case, dtype):
    """Two full steps (first-call caches and compilations out of the way, and the scratch
    of each worker thread: a split part may land on another thread in the next step),
    then the grads set to None.  Returns the parameters the steps used (those that got a
    grad)."""
    for _ in range(2):
        loss = case.loss(dtype)
        loss.backward()
        del loss
    used = [p for p in case.params if p.grad is not None]
    clear_grads(case.params)
    return used


def clear_grads(params):
    for p in params:
        p.grad = None
    gc.collect()


def unique_bytes(arrays):
    """Bytes of distinct buffers among NumPy ``arrays`` (views count their base once)."""
    roots = {}
    for a in arrays:
        while getattr(a, "base", None) is not None:
            a = a.base
        roots[id(a)] = a.nbytes
    return sum(roots.values())


def lezero_step(case, dtype):
    """{"kept", "peak", "lz", "lz_copies"} bytes of one LeZero step (see the module doc)."""
    used = warm(case, dtype)
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    try:
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        loss = case.loss(dtype)
        kept = tracemalloc.get_traced_memory()[0] - before
        loss.backward()
        peak = tracemalloc.get_traced_memory()[1] - before
        del loss
    finally:
        if started:
            tracemalloc.stop()
    clear_grads(case.params)
    lz_kept, copies = lezero_profiled(case, dtype, used)
    return {"kept": kept, "peak": peak, "lz": lz_kept, "lz_copies": copies}


def lezero_profiled(case, dtype, used):
    """(saved bytes after forward minus the ``used`` parameters, of which autocast's
    copies of parameters), as ``lz.memory.profile`` counts them."""
    import lezero as lz
    params = unique_bytes([p.data for p in used])
    with lz.memory.profile(live=False) as prof:
        loss = case.loss(dtype)
        saved, activations = prof.saved_bytes, prof.activation_bytes
        del loss
    clear_grads(case.params)
    return saved - params, saved - params - activations


# Autograd nodes of views: what they save shares the storage of the tensor they view.
_VIEWS = frozenset(["TBackward0", "TransposeBackward0", "PermuteBackward0", "ViewBackward0",
                    "UnsafeViewBackward0", "ExpandBackward0", "AsStridedBackward0",
                    "SliceBackward0", "SelectBackward0", "UnsqueezeBackward0",
                    "SqueezeBackward0", "AliasBackward0"])


class _Node:
    """A stand-in tensor for ``TorchSaved._param_copy``: only its ``grad_fn``."""

    def __init__(self, grad_fn):
        self.grad_fn = grad_fn


class TorchSavedCopies(TorchSaved):
    """``TorchSaved`` that also recognises an autocast copy of a parameter saved through a
    view (``nn.Linear`` under autocast saves ``weight_copy.t()``, whose node is TBackward0,
    not the cast), and notes the bytes of the copies it leaves out (``copies``)."""

    def __init__(self, params):
        super().__init__(params)
        self.copies = {}

    def _param_copy(self, t):
        fn = t.grad_fn
        while fn is not None and type(fn).__name__ in _VIEWS:
            fn = fn.next_functions[0][0]
        if not super()._param_copy(_Node(fn)):
            return False
        self.copies[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return True


def torch_step(case, dtype):
    """{"kept", "peak", "copies"} bytes of one PyTorch step (see the module doc)."""
    import torch
    warm(case, dtype)
    acct = TorchSavedCopies(case.params)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                profile_memory=True) as prof:
        with torch.autograd.graph.saved_tensors_hooks(acct.pack, acct.unpack):
            loss = case.loss(dtype)
            kept, copies = acct.now, sum(acct.copies.values())
            loss.backward()
            del loss
    clear_grads(case.params)
    return {"kept": kept, "peak": profiler_peak(prof), "copies": copies}


def profiler_peak(prof):
    """The peak of the running sum of PyTorch's CPU allocations and frees recorded by
    ``prof`` (a ``torch.profiler.profile(profile_memory=True)``), in bytes."""
    from torch.autograd.profiler import MEMORY_EVENT_NAME
    events = [e for e in prof.profiler.kineto_results.events()
              if e.name() == MEMORY_EVENT_NAME]
    now = peak = 0
    for e in sorted(events, key=lambda e: e.start_ns()):
        now += e.nbytes()
        peak = max(peak, now)
    return peak
