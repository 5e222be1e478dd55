"""The operators with a first-order ``backward_arrays``: a first-order pass runs it (and
not ``backward``), ``create_graph`` runs ``backward``, and both give the same gradients.

Each case is (the Function class, a loss of some leaves, the leaves, the tolerance).
"""
import numpy as np
import pytest

import lezero as lz
import lezero.functions as F
from lezero.amp import cast
from lezero.amp.cast import Cast
from lezero.checkpoint import Checkpoint
from lezero.functions.activation.piecewise import ReLU
from lezero.functions.attention.chunked import ChunkedAttention
from lezero.functions.attention import fused
from lezero.functions.attention.fused import FusedAttention
from lezero.functions.linalg.product import Linear
from lezero.functions.normalization.fused import Normalize
from lezero.functions.rnn.layers import LSTMLayer
from lezero.functions.shape.join import Split


def leaves(*shapes, dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    return [lz.Variable(rng.standard_normal(s).astype(dtype)) for s in shapes]


def weighted(y):
    """A loss whose gradient differs per element (ones would hide mix-ups)."""
    w = np.linspace(-1.0, 2.0, y.size).reshape(y.shape).astype(y.dtype)
    return (y * w).sum()


def _lstm(x, h0, c0, w_ih, w_hh, b_ih, b_hh):
    y, (h, c) = F.lstm(x, (h0, c0), [w_ih, w_hh, b_ih, b_hh])
    return weighted(y) + weighted(h) + weighted(c)


def _split(x):
    a, b = F.split(x, [1], axis=1)
    return weighted(a * 2.0) + weighted(b * b)


CASES = {
    "relu": (ReLU, lambda x: weighted(F.relu(x)), lambda: leaves((3, 4)), 1e-12),
    "split": (Split, _split, lambda: leaves((3, 4)), 1e-12),
    "fused attention": (
        FusedAttention, lambda q, k, v: weighted(F.scaled_dot_product_attention(q, k, v)),
        lambda: leaves((2, 2, 5, 4), (2, 2, 6, 4), (2, 2, 6, 3), dtype=np.float32), 1e-5),
    "chunked attention": (
        ChunkedAttention,
        lambda q, k, v: weighted(F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                                                chunk_size=2)),
        lambda: leaves((2, 5, 4), (2, 5, 4), (2, 5, 3)), 1e-12),
    "linear": (Linear, lambda x, w, b: weighted(F.linear(x, w, b)),
               lambda: leaves((2, 3, 4), (5, 4), (5,)), 1e-12),
    "layer norm (kernel)": (Normalize,
                            lambda x, w, b: weighted(F.layer_norm(x, (4,), w, b)),
                            lambda: leaves((3, 4), (4,), (4,)), 1e-10),
    "group norm (arrays)": (Normalize,
                            lambda x, w, b: weighted(F.group_norm(x, 2, w, b)),
                            lambda: leaves((2, 4, 3), (4,), (4,)), 1e-10),
    "lstm": (LSTMLayer, _lstm,
             lambda: leaves((4, 2, 3), (1, 2, 5), (1, 2, 5), (20, 3), (20, 5), (20,), (20,)),
             1e-10),
    "cast": (Cast, lambda x: weighted(cast(x, np.float16) * np.float16(2.0)),
             lambda: leaves((3, 4), dtype=np.float32), 0),
    "checkpoint": (Checkpoint, lambda x, w: weighted(lz.checkpoint(
        lambda a: F.sin(a) * w, x)), lambda: leaves((3, 4), (4,)), 1e-12),
}


def _spy(monkeypatch, cls, name, calls):
    original = getattr(cls, name)

    def spy(self, *gys):
        calls.append(name)
        return original(self, *gys)
    monkeypatch.setattr(cls, name, spy)


@pytest.mark.parametrize("case", list(CASES))
def test_first_order_runs_backward_arrays_and_matches_create_graph(case, monkeypatch):
    cls, loss, make, tol = CASES[case]
    if cls is FusedAttention and not fused.fits(*(x.data for x in make()), None, None, 0):
        pytest.skip("the fused attention kernels are off here (Numba or cblas_sgemm missing)")
    calls = []
    _spy(monkeypatch, cls, "backward", calls)
    _spy(monkeypatch, cls, "backward_arrays", calls)
    xs = make()
    first = lz.grad(loss(*xs), xs)
    assert set(calls) == {"backward_arrays"}
    calls.clear()
    graph = lz.grad(loss(*xs), xs, create_graph=True)
    assert set(calls) == {"backward"}
    for x, g1, g2 in zip(xs, first, graph):
        assert g1.creator is None and g1.dtype == x.dtype and g2.dtype == x.dtype
        np.testing.assert_allclose(g1.data, g2.data, rtol=tol, atol=tol)
