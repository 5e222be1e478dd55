"""``lezero.testing``: the operator checks LeZero's own tests use, for your Functions too.

Every operator is held to three checks: central differences in float64, double backward,
and parity with PyTorch (forward and backward) in float32.  Operator arguments that are not
differentiable (indices, shapes, flags) are closed over in the test's lambda, so the
checks only see floating-point arrays.

    check_gradient(lambda x: F.tanh(x), x64)                       # float64, central diffs
    check_double_backward(lambda x: F.tanh(x), x64)
    check_torch(lambda x: F.tanh(x), torch.tanh, x32)              # float32, fwd + bwd
"""
import numpy as np

import lezero as lz
from lezero import cuda
from lezero.backends import of_namespace
from lezero.testing import recording

__all__ = ["rand", "check_gradient", "check_double_backward", "check_torch", "check_all"]


def _torch():
    """PyTorch, imported on first use: it is the oracle, never a dependency of LeZero."""
    try:
        import torch
    except ImportError:
        raise ImportError("lezero.testing.check_torch compares against PyTorch; install it "
                          "with `pip install torch` (LeZero's tests pin torch==2.13.0)") from None
    return torch


def rand(*shape, dtype=np.float64, low=-1.0, high=1.0, seed=None, xp=np):
    """Uniform random test data (NumPy or CuPy)."""
    rng = np.random.default_rng(seed)
    return _on(xp, rng.uniform(low, high, size=shape).astype(dtype))


def _on(xp, a):
    """Host array ``a`` on the backend whose namespace is ``xp``."""
    return of_namespace(xp).asarray(a)


def _as_list(ys):
    return list(ys) if isinstance(ys, (list, tuple)) else [ys]


def check_gradient(fn, *arrays, rtol=1e-5, atol=1e-6, eps=1e-6):
    """Backward equals float64 central differences (arrays are cast to float64)."""
    xs = [np.asarray(cuda.as_numpy(a), dtype=np.float64) for a in arrays]
    assert lz.utils.gradient_check(fn, *xs, rtol=rtol, atol=atol, eps=eps)
    recording.record("gradient", fn, *map(lz.Variable, xs))


def check_double_backward(fn, *arrays, rtol=1e-4, atol=1e-5, eps=1e-6):
    """Gradient of the gradient equals central differences of the gradient (float64)."""
    xs = [np.asarray(cuda.as_numpy(a), dtype=np.float64) for a in arrays]
    assert lz.utils.check_double_backward(fn, *xs, rtol=rtol, atol=atol, eps=eps)
    recording.record("double", fn, *map(lz.Variable, xs))


def check_torch(fn, torch_fn, *arrays, rtol=1e-4, atol=1e-5, grad=True, seed=0, xp=np):
    """Forward and backward of ``fn`` (LeZero) equal ``torch_fn`` (PyTorch) in float32.

    Both get the same inputs; a random upstream gradient is pushed back through both and
    the input gradients compared.  ``xp=cupy`` runs LeZero on the GPU (PyTorch on the CPU).
    """
    torch = _torch()
    arrays = [np.asarray(cuda.as_numpy(a)) for a in arrays]
    lz_in = [lz.Variable(_on(xp, a)) for a in arrays]
    t_in = [torch.tensor(a, requires_grad=grad and a.dtype.kind == "f") for a in arrays]
    lz_out = _as_list(fn(*lz_in))
    t_out = _as_list(torch_fn(*t_in))
    assert len(lz_out) == len(t_out), f"{len(lz_out)} outputs vs torch's {len(t_out)}"
    for k, (a, b) in enumerate(zip(lz_out, t_out)):
        a_np = cuda.as_numpy(a.data)
        b_np = b.detach().numpy()
        assert a_np.shape == b_np.shape, f"output {k}: shape {a_np.shape} vs torch {b_np.shape}"
        if b_np.dtype.kind == "f":
            assert a_np.dtype == b_np.dtype, f"output {k}: dtype {a_np.dtype} vs {b_np.dtype}"
        np.testing.assert_allclose(a_np, b_np, rtol=rtol, atol=atol,
                                   err_msg=f"forward output {k} differs from torch")
    if grad:
        _compare_torch_grads(lz_out, t_out, lz_in, t_in, seed, xp, rtol, atol)
    recording.record("torch" if grad else "torch_forward", fn,
                     *[lz.Variable(v.data) for v in lz_in])


def _compare_torch_grads(lz_out, t_out, lz_in, t_in, seed, xp, rtol, atol):
    """Push one random upstream gradient through both graphs; compare the input grads."""
    torch = _torch()
    rng = np.random.default_rng(seed)
    pairs = [(a, b) for a, b in zip(lz_out, t_out) if b.requires_grad]
    gys = [rng.standard_normal(b.shape).astype(np.float32) for _, b in pairs]
    wrt = [(v, t) for v, t in zip(lz_in, t_in) if t.requires_grad]
    if not pairs or not wrt:
        return
    lz_g = lz.grad([a for a, _ in pairs], [v for v, _ in wrt],
                   grad_outputs=[_on(xp, g) for g in gys],
                   allow_unused=True)
    t_g = torch.autograd.grad([b for _, b in pairs], [t for _, t in wrt],
                              grad_outputs=[torch.tensor(g) for g in gys], allow_unused=True)
    for i, (a, b) in enumerate(zip(lz_g, t_g)):
        if b is None:
            assert a is None or not np.any(cuda.as_numpy(a.data)), f"input {i}: torch gives no grad"
            continue
        assert a is not None, f"input {i}: LeZero gives no gradient, torch does"
        np.testing.assert_allclose(cuda.as_numpy(a.data), b.numpy(), rtol=rtol, atol=atol,
                                   err_msg=f"gradient of input {i} differs from torch")


def check_all(fn, torch_fn, *arrays, double=True, rtol=1e-4, atol=1e-5, grad_rtol=1e-5,
              grad_atol=1e-6):
    """The three operator checks: central differences (float64), double backward (float64,
    when ``double``) and PyTorch parity (float32)."""
    check_gradient(fn, *arrays, rtol=grad_rtol, atol=grad_atol)
    if double:
        check_double_backward(fn, *arrays)
    check_torch(fn, torch_fn, *[np.asarray(a, dtype=np.float32) for a in arrays],
                rtol=rtol, atol=atol)
