"""An autocast region drops each weight's float16 copy right after its last expected use
(``amp.uses``), learned from the region before; backward recasts it, so gradients keep
their bits, and a use beyond the expected count recasts it too."""
import gc
import tracemalloc

import numpy as np
import pytest

import lezero as lz
import lezero.functions as F
from lezero import amp, nn
from lezero.amp.copies import ParamCopy

_SLOT = lz.Variable.data        # the array slot, read without recasting a dropped copy


def _held(copy):
    return _SLOT.__get__(copy) is not None


def _mlp():
    lz.manual_seed(0)
    return nn.Sequential(nn.Linear(64, 256), nn.Tanh(), nn.Linear(256, 256), nn.Tanh(),
                         nn.Linear(256, 10))


def _x(rows=8, width=64):
    data = np.random.default_rng(0).standard_normal((rows, width)).astype(np.float32)
    return lz.Variable(data, requires_grad=False)


def _step(model, x, t, inside=None):
    """One training step; ``inside(region)`` runs before the region ends.  Returns the
    parameters' gradients (then cleared)."""
    region = amp.autocast()
    with region:
        loss = F.cross_entropy(model(x), t)
        if inside is not None:
            inside(region._hooks[-1])
    loss.backward()
    grads = [p.grad.data.copy() for p in model.parameters()]
    for p in model.parameters():
        p.grad = None
    return grads


def _copies(hook):
    return [entry[2] for entry in hook.cache.values()]


def test_copies_go_after_their_last_use_from_the_second_region_on():
    model, x, t = _mlp(), _x(), np.arange(8) % 10
    held = []

    def look(hook):
        assert {type(c) for c in _copies(hook)} == {ParamCopy}
        held.append([_held(c) for c in _copies(hook)])
    first = _step(model, x, t, look)
    second = _step(model, x, t, look)
    assert held[0] == [True] * 6            # the first region learns: all alive at its end
    assert held[1] == [False] * 6           # then each goes after its one use
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)     # backward's recast copy is the same copy


def test_a_tied_weight_goes_after_its_second_use_and_an_extra_use_recasts():
    lz.manual_seed(0)
    w = lz.Parameter(np.random.default_rng(1).standard_normal((16, 16)).astype(np.float32))
    x = _x(4, 16)

    def step(uses, probe=None):
        with amp.autocast() as region:
            h = x
            for i in range(uses):
                h = F.tanh(F.linear(h, w))
                if probe is not None:
                    copy = next(iter(region._hooks[-1].cache.values()))[2]
                    probe.append(_held(copy))
        F.sum(h).backward()
        g, w.grad = w.grad.data.copy(), None
        return g

    step(2)                                   # learns: two uses a region
    probe = []
    step(2, probe)
    assert probe == [True, False]             # kept for the second use, gone after it
    extra = []
    got = step(3, extra)                      # one use more than expected: recast, kept
    assert extra == [True, False, True]
    fresh = lz.Parameter(w.data.copy())       # no expectation: nothing dropped early
    w_saved, w = w, fresh
    want = step(3)
    w = w_saved
    np.testing.assert_array_equal(got, want)


def _forward_end_bytes(model, x):
    """Bytes alive at the end of a region's forward (before the region ends)."""
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        with amp.autocast():
            loss = F.sum(model(x))
            alive = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    loss.backward()
    for p in model.parameters():
        p.grad = None
    return alive


def test_the_forward_no_longer_ends_with_every_copy_alive():
    lz.manual_seed(0)
    model = nn.Sequential(*[nn.Linear(512, 512) for _ in range(4)])
    x = _x(2, 512)
    first = _forward_end_bytes(model, x)
    second = _forward_end_bytes(model, x)
    copies = 4 * 512 * 512 * 2                # float16 weights
    assert first - second > 0.9 * copies, (first, second)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_learned_counts_do_not_change_gradients_of_a_recurrent_cell(dtype):
    """An RNN built from cells reads its weights once per time step."""
    if dtype == "bfloat16":
        pytest.importorskip("ml_dtypes")
    lz.manual_seed(0)
    cell = nn.RNNCell(8, 8)
    xs = [_x(2, 8) for _ in range(5)]

    def step():
        with amp.autocast(dtype):
            h = lz.Variable(np.zeros((2, 8), np.float32), requires_grad=False)
            for x in xs:
                h = cell(x, h)
        F.sum(h).backward()
        grads = [p.grad.data.copy() for p in cell.parameters()]
        for p in cell.parameters():
            p.grad = None
        return grads
    first, second = step(), step()
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)
