"""The layer test harness: load a PyTorch layer's state_dict into ours, then compare.

    ours, theirs = nn.Linear(3, 4), torch.nn.Linear(3, 4)
    check_layer(ours, theirs, x)          # keys, forward, input and parameter gradients

Both layers get the same float32 inputs (float arrays become differentiable inputs,
integer and bool arrays constants), one random upstream gradient per output is pushed back
through both, and the outputs, the input gradients and every parameter's gradient are
compared by name.  Outputs may be nested tuples (an LSTM's ``(out, (h, c))``) or
PackedSequences (compared by their data).
"""
import numpy as np
import torch

import lezero as lz
import lezero.functions as F
from lezero.functions import PackedSequence


def torch_state(theirs):
    return {k: v.detach().numpy().copy() for k, v in theirs.state_dict().items()}


def load_from_torch(ours, theirs):
    """Check the state_dict keys (and their order) agree, then load strictly."""
    sd = torch_state(theirs)
    assert list(ours.state_dict()) == list(sd), \
        f"keys differ:\n ours  {list(ours.state_dict())}\n torch {list(sd)}"
    ours.load_state_dict(sd, strict=True)
    return sd


def flatten(out):
    """Leaves of nested tuples/lists, PackedSequences replaced by their data; None dropped."""
    if out is None:
        return []
    if isinstance(out, (PackedSequence, torch.nn.utils.rnn.PackedSequence)):
        return [out.data]
    if isinstance(out, (tuple, list)):
        return [leaf for item in out for leaf in flatten(item)]
    return [out]


def _inputs(arrays, constants):
    ours, theirs = [], []
    for i, a in enumerate(arrays):
        if isinstance(a, np.ndarray) and a.dtype.kind == "f" and i not in constants:
            a = a.astype(np.float32)
            ours.append(lz.Variable(a.copy()))
            theirs.append(torch.tensor(a, requires_grad=True))
        elif isinstance(a, np.ndarray):
            a = a.astype(np.float32) if a.dtype.kind == "f" else a
            ours.append(a)
            theirs.append(torch.from_numpy(a.copy()))
        else:                         # None, flags, sizes: passed to both as they are
            ours.append(a)
            theirs.append(a)
    return ours, theirs


def check_layer(ours, theirs, *arrays, train=True, rtol=1e-4, atol=1e-5, kwargs=None,
                torch_kwargs=None, call=None, torch_call=None, load=True, seed=0,
                constants=()):
    """Compare ``ours(*inputs)`` with ``theirs(*inputs)``: forward outputs, then the
    gradients of every float input and every parameter for a random upstream gradient.
    Float inputs whose positions are in ``constants`` (targets) get no gradient.

    ``call(module, inputs)`` / ``torch_call`` replace the plain call when inputs need
    wrapping (packing a sequence, building masks).  Returns (our outputs, torch outputs).
    """
    if load:
        load_from_torch(ours, theirs)
    ours.train(train)
    theirs.train(train)
    lz_in, t_in = _inputs(arrays, constants)
    kwargs = kwargs or {}
    torch_kwargs = kwargs if torch_kwargs is None else torch_kwargs
    lz_out = flatten(call(ours, lz_in) if call else ours(*lz_in, **kwargs))
    t_out = flatten(torch_call(theirs, t_in) if torch_call else theirs(*t_in, **torch_kwargs))
    assert len(lz_out) == len(t_out), f"{len(lz_out)} outputs vs torch's {len(t_out)}"
    for k, (a, b) in enumerate(zip(lz_out, t_out)):
        b = b.detach().numpy()
        assert a.shape == b.shape, f"output {k}: shape {a.shape} vs torch {b.shape}"
        np.testing.assert_allclose(a.data, b, rtol=rtol, atol=atol,
                                   err_msg=f"forward output {k} differs from torch")

    rng = np.random.default_rng(seed)
    pairs = [(a, b) for a, b in zip(lz_out, t_out) if b.requires_grad]
    if not pairs:
        return lz_out, t_out
    gys = [rng.standard_normal(b.shape).astype(np.float32) for _, b in pairs]
    loss = None
    for (a, _), g in zip(pairs, gys):
        term = F.sum(a * g)
        loss = term if loss is None else loss + term
    loss.backward()
    torch.autograd.backward([b for _, b in pairs], [torch.tensor(g) for g in gys])

    for i, (a, b) in enumerate(zip(lz_in, t_in)):
        if isinstance(b, torch.Tensor) and b.requires_grad:
            assert a.grad is not None, f"input {i}: no gradient"
            np.testing.assert_allclose(a.grad.data, b.grad.numpy(), rtol=rtol, atol=atol,
                                       err_msg=f"gradient of input {i} differs from torch")
    t_params = dict(theirs.named_parameters())
    lz_params = dict(ours.named_parameters())
    assert list(lz_params) == list(t_params)
    for name, p in lz_params.items():
        tp = t_params[name]
        if tp.grad is None:
            assert p.grad is None or not np.any(p.grad.data), f"{name}: torch gives no grad"
            continue
        assert p.grad is not None, f"parameter {name}: no gradient"
        np.testing.assert_allclose(p.grad.data, tp.grad.numpy(), rtol=rtol, atol=atol,
                                   err_msg=f"gradient of parameter {name} differs from torch")
    return lz_out, t_out


def check_buffers(ours, theirs, rtol=1e-5, atol=1e-6):
    """Every buffer of ours equals torch's of the same name (running stats, counters)."""
    t_buffers = dict(theirs.named_buffers())
    lz_buffers = dict(ours.named_buffers())
    assert list(lz_buffers) == list(t_buffers)
    for name, b in lz_buffers.items():
        tb = t_buffers[name].numpy()
        assert b.dtype == tb.dtype, f"buffer {name}: dtype {b.dtype} vs torch {tb.dtype}"
        np.testing.assert_allclose(b, tb, rtol=rtol, atol=atol, err_msg=f"buffer {name}")


def rand(*shape, seed=0, low=-1.0, high=1.0):
    return np.random.default_rng(seed).uniform(low, high, shape).astype(np.float32)
