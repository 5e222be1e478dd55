"""The pass sums a Variable's gradients in place only when no one else can see the total
(``lezero.grad_sum``): the same bits as ``a + b``, one array fewer alive, and never a
write into a gradient that is shared (one Variable returned for two inputs, a retained
``.grad``, an upstream gradient)."""
import gc
import sys
import tracemalloc

import numpy as np
import pytest

import lezero as lz
import lezero.functions as F
import lezero.grad_sum as grad_sum
from lezero import amp, nn
from lezero.core import Function, backward, using_config


@pytest.fixture
def out_of_place(monkeypatch):
    """Turn the in-place sum off (every total counts as shared)."""
    monkeypatch.setattr(grad_sum, "_ALONE", (0, 0))


def _branchy(seed=0):
    """Gradients of a graph where non-leaves and leaves get two and three contributions."""
    rng = np.random.default_rng(seed)
    x = lz.Variable(rng.standard_normal((6, 5)).astype(np.float32))
    w = lz.Variable(rng.standard_normal((5, 5)).astype(np.float32))
    h = F.tanh(x @ w)
    y = F.sum(h * 3.0) + F.sum(F.sin(h) @ w) + F.sum(h * h)
    y.backward()
    return x.grad.data.copy(), w.grad.data.copy()


def test_in_place_sums_give_the_bits_of_out_of_place_sums(monkeypatch):
    counts = []
    real = grad_sum.add_grads

    def spy(total, g):
        out = real(total, g)
        counts.append(out is total)
        return out
    monkeypatch.setattr(sys.modules["lezero.core.backward"], "add_grads", spy)
    alone = grad_sum._ALONE                    # the spy's frame holds the total once more
    monkeypatch.setattr(grad_sum, "_ALONE", (alone[0] + 1, alone[1]))
    fast = _branchy()
    assert True in counts                    # some sums ran in place
    monkeypatch.setattr(grad_sum, "_ALONE", (0, 0))
    counts.clear()
    slow = _branchy()
    assert counts and True not in counts
    for a, b in zip(fast, slow):
        np.testing.assert_array_equal(a, b)


class _Both(Function):
    """a + b whose backward returns ONE gradient Variable for both inputs (as Add does)."""

    def forward(self, a, b):
        return a + b

    def backward(self, gy):
        return gy, gy


def test_a_gradient_variable_shared_by_two_inputs_is_not_summed_into():
    a = lz.Variable(np.ones(4, np.float32))
    b = lz.Variable(np.ones(4, np.float32))
    # _Both runs first (queued first at generation 0) and gives a and b its gy (a fresh
    # array: Mul's gradient); a's second use, behind more Functions, then adds 2 to a's
    # total -- into gy in place would give b the gradient 3 too.
    y = F.sum(_Both()(a, b) * 1.0) + F.sum(a * 2.0 * 1.0 * 1.0)
    y.backward()
    np.testing.assert_array_equal(a.grad.data, np.full(4, 3, np.float32))
    np.testing.assert_array_equal(b.grad.data, np.ones(4, np.float32))


def test_a_retained_gradient_and_an_upstream_gradient_are_not_summed_into():
    x = lz.Variable(np.arange(4, dtype=np.float32))
    h = x * 1.0
    m = h * 1.0                               # m's gradient, retained, flows on to h ...
    y = F.sum(m * 1.0) + F.sum(h * 5.0)       # ... through a backward returning it as is
    y.backward(retain_grad=True)
    np.testing.assert_array_equal(m.grad.data, np.ones(4, np.float32))
    np.testing.assert_array_equal(h.grad.data, np.full(4, 6, np.float32))
    np.testing.assert_array_equal(x.grad.data, np.full(4, 6, np.float32))


def test_a_caller_given_gradient_is_not_summed_into():
    x = lz.Variable(np.ones(3, np.float32))
    y = x * 2.0
    seed = np.ones(3, np.float32)
    backward([y, y], [seed, seed])             # one output twice: the seeds are summed
    np.testing.assert_array_equal(seed, np.ones(3, np.float32))
    np.testing.assert_array_equal(x.grad.data, np.full(3, 4, np.float32))


class _TiedLM(nn.Module):
    """A token embedding whose weight is also the output projection (GPT-2's wte)."""

    def __init__(self, vocab, dim):
        super().__init__()
        self.wte = nn.Embedding(vocab, dim)

    def forward(self, ids):
        h = F.tanh(self.wte(ids))
        return F.sum(F.linear(h, self.wte.weight))      # as nn.Linear tied to it


def _tied_backward_peak(dtype=None):
    """Bytes the backward of a tied model allocates at its peak, above what it started
    with, in units of the tied weight's float32 size."""
    lz.manual_seed(0)
    model = _TiedLM(8192, 128)                 # 4 MiB of float32 weight
    ids = np.arange(8).reshape(2, 4)
    for _ in range(2):                         # the second step is the one measured
        model.wte.weight.grad = None
        gc.collect()
        with amp.autocast(dtype or "float16", enabled=dtype is not None):
            loss = model(ids)
        tracemalloc.start()
        # One thread: a worker that ran one of linear's two products may hold its result
        # for a moment after handing it over, which makes the total look shared.
        try:
            with using_config("pair_gemms", False):
                start = tracemalloc.get_traced_memory()[0]
                loss.backward()
                peak = tracemalloc.get_traced_memory()[1] - start
        finally:
            tracemalloc.stop()
        del loss
    return peak / model.wte.weight.data.nbytes, model.wte.weight.grad.data.copy()


# The float16 step peaks in the emulated linear's backward instead (a float32 copy of the
# weight, its float32 gradient and that gradient rounded: 2.6), no longer at the sum.
@pytest.mark.parametrize("dtype,most", [(None, 2.2), ("float16", 2.75)])
def test_a_tied_weight_gradient_is_not_materialised_three_times(dtype, most, out_of_place):
    slow_peak, slow_grad = _tied_backward_peak(dtype)
    grad_sum._ALONE = grad_sum._calibrate()          # back on (the fixture restores it too)
    peak, grad = _tied_backward_peak(dtype)
    np.testing.assert_array_equal(grad, slow_grad)
    assert slow_peak > 2.9                  # two contributions and their sum
    assert peak < most, f"the backward peaked at {peak:.2f} x the tied weight's bytes"
