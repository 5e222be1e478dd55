"""The generated Numba kernels against their NumPy reference (the nodes run one by one)."""
import numpy as np
import pytest

import lezero as lz
import lezero.functions as F
from lezero import jit, kernels
from lezero.jit import passes
from lezero.jit.passes.codegen import ELEMENTWISE

pytestmark = pytest.mark.skipif(not kernels.numba_available(), reason="Numba is missing")
RNG = np.random.default_rng(3)


def _kernel(fn, *xs):
    g = passes.fuse(jit.trace(fn, *xs, optimize=False).graph)
    (node,) = [n for n in g.nodes if n.op == "Fused"]
    return node.attrs["_kernel"], [xs[g.inputs.index(n)] if n in g.inputs else g.consts[n]
                                   for n in node.inputs]


def _chains():
    """Three kernels that together use every operator in the elementwise table."""
    def unary(x):                   # x in (0.5, 1.5): every function is defined there
        y = F.sqrt(x) + F.rsqrt(x) + F.reciprocal(x) + F.log(x) + F.log1p(x) + F.exp(x)
        y = y + F.expm1(x) + F.abs(-x) + F.sin(x) + F.cos(x) + F.tanh(x) + F.erf(x)
        return F.square(y) / 7.0 - x ** 1.5
    def activations(x):             # any sign
        y = F.relu(x) + F.leaky_relu(x, 0.2) + F.hardtanh(x, -0.5, 0.5) + F.hardsigmoid(x)
        y = y + F.hardswish(x) + F.sigmoid(x) + F.silu(x) + F.softsign(x) + F.tanhshrink(x)
        y = y + F.gelu(x) + F.gelu(x, approximate="tanh") + F.elu(x, 0.7) + F.selu(x)
        return y + F.softplus(x, 2.0, 1.0)
    def broadcast(x, b, s):         # (N, C, H, W) with per-channel and scalar operands
        return F.relu(x * b - s) + F.neg(b)
    return [(unary, [RNG.uniform(0.5, 1.5, (5, 7)).astype(np.float32)]),
            (activations, [RNG.uniform(-4, 4, (6, 9)).astype(np.float32)]),
            (broadcast, [RNG.standard_normal((2, 3, 4, 5)).astype(np.float32),
                         RNG.standard_normal((1, 3, 1, 1)).astype(np.float32),
                         np.float32(0.25) * np.ones((), np.float32)])]


def test_the_three_chains_cover_the_whole_table():
    seen = set()
    for fn, xs in _chains():
        seen.update(n.op for n in jit.trace(fn, *xs, optimize=False).graph.nodes)
    assert set(ELEMENTWISE) <= seen


@pytest.mark.parametrize("case", range(3))
def test_numba_kernel_equals_numpy_path(case):
    fn, xs = _chains()[case]
    kernel, ins = _kernel(fn, *xs)
    ref = kernel.numpy_path(ins)
    got = kernel.numba_path(ins)
    assert got.dtype == ref.dtype and got.shape == ref.shape
    np.testing.assert_allclose(got, ref, rtol=2e-5, atol=2e-6)
    np.testing.assert_allclose(ref, fn(*xs).data, rtol=1e-6, atol=1e-7)


def test_kernel_writes_into_a_given_buffer_and_float64_stays_float64():
    x = RNG.standard_normal((4, 4))
    kernel, ins = _kernel(lambda v: F.tanh(v) * 2.0 + 1.0, x)
    out = np.empty((4, 4))
    assert kernel.numba_path(ins, out) is out
    np.testing.assert_allclose(out, np.tanh(x) * 2 + 1, rtol=1e-12)


def test_use_numba_off_takes_the_numpy_path():
    x = RNG.standard_normal((3, 3)).astype(np.float32)
    kernel, ins = _kernel(lambda v: F.relu(v) * 3.0, x)
    calls = []
    kernel.numba_path = lambda *a, **k: calls.append(1)
    with lz.using_config("use_numba", False):
        np.testing.assert_allclose(kernel(ins), np.maximum(x, 0) * 3)
    assert not calls
