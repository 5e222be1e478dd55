"""``products.matmul_pair`` runs two large independent products at once and gives the
products; ``linear``'s first-order backward uses it and still matches PyTorch."""
import numpy as np
import pytest

import lezero as lz
import lezero.functions as F
from lezero.runtime import blas, products, scheduler

pytestmark = pytest.mark.skipif(blas.controller() is None,
                                reason="splitting needs threadpoolctl")


def _arrays(rng, *shapes):
    return [rng.standard_normal(s).astype(np.float32) for s in shapes]


def test_large_products_run_at_once_and_equal_the_reference(monkeypatch, threaded):
    ran = []
    real = scheduler.run_parts
    monkeypatch.setattr(products, "run_parts", lambda fn, n: ran.append(n) or real(fn, n))
    g, w, x = _arrays(np.random.default_rng(0), (200, 300), (300, 250), (200, 250))
    with lz.using_config("conv_threads", 2):
        assert products.pairs(g, w, g.T, x)
        got = products.matmul_pair(g, w, g.T, x)
    assert ran == [2]
    for a, b in zip(got, products.matmul_pair_ref(g, w, g.T, x)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("case", ["small", "one thread", "not a plain ndarray", "setting off"])
def test_when_it_does_not_pair(case):
    rng = np.random.default_rng(1)
    if case == "small":                      # 2*20*30*25 flops: far below policy.small_flops
        g, w, x = _arrays(rng, (20, 30), (30, 25), (20, 25))
    else:
        g, w, x = _arrays(rng, (200, 300), (300, 250), (200, 250))
    if case == "not a plain ndarray":        # a subclass (CuPy arrays are not ndarrays)
        g = g.view(type("Sub", (np.ndarray,), {}))
    with lz.using_config("conv_threads", 1 if case == "one thread" else 2), \
            lz.using_config("pair_gemms", case != "setting off"):
        assert not products.pairs(g, w, g.T, x)
        got = products.matmul_pair(g, w, g.T, x)
    for a, b in zip(got, products.matmul_pair_ref(g, w, g.T, x)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-4)


def test_linear_backward_pairs_and_matches_torch(monkeypatch, threaded):
    torch = pytest.importorskip("torch")
    ran = []
    real = scheduler.run_parts
    monkeypatch.setattr(products, "run_parts", lambda fn, n: ran.append(n) or real(fn, n))
    x0, w0, b0, gy = _arrays(np.random.default_rng(2), (4, 64, 256), (192, 256), (192,),
                             (4, 64, 192))
    x, w, b = lz.Parameter(x0), lz.Parameter(w0), lz.Parameter(b0)
    with lz.using_config("conv_threads", 2):
        F.linear(x, w, b).backward(grad=lz.Variable(gy))
    assert ran == [2]                        # two 25-MFLOP products: paired
    tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x0, w0, b0))
    torch.nn.functional.linear(tx, tw, tb).backward(torch.from_numpy(gy))
    for ours, theirs in ((x, tx), (w, tw), (b, tb)):
        np.testing.assert_allclose(ours.grad.data, theirs.grad.numpy(), rtol=1e-4, atol=1e-4)


def test_products_above_pair_max_flops_run_one_after_the_other_on_the_team(monkeypatch,
                                                                           threaded):
    """Where the native product workers run, two products above ``pair_max_flops`` each
    split over them instead of running at once on two threads; without them they pair."""
    from lezero.runtime import policy
    g, w, x = _arrays(np.random.default_rng(3), (200, 300), (300, 250), (200, 250))
    with lz.using_config("conv_threads", 2), policy.using(pair_max_flops=1e7):
        monkeypatch.setattr(products, "team_available", lambda: True)
        assert not products.pairs(g, w, g.T, x)
        got = products.matmul_pair(g, w, g.T, x)
        monkeypatch.setattr(products, "team_available", lambda: False)
        assert products.pairs(g, w, g.T, x)
    for a, b in zip(got, products.matmul_pair_ref(g, w, g.T, x)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-4)
    with lz.using_config("conv_threads", 2), policy.using(pair_max_flops=1e9):
        monkeypatch.setattr(products, "team_available", lambda: True)
        assert products.pairs(g, w, g.T, x)
