"""Shared by the tensor/pipeline/grid tests: tensor groups of a given size, the dense
reference's gradients cut like the parallel layer's, and assertions every rank agrees on
(the worst error is reduced over the world first, so a failure never leaves the ranks out
of step)."""
import numpy as np
import pytest

import lezero as lz
from lezero import parallel
from lezero.parallel.tensor import shard

_groups = {}


def world():
    return parallel.init(timeout=30)


def tp_group(size):
    """A tensor group of ``size`` consecutive ranks (skips when the world cannot make it).
    Made once per size: ``split`` is collective, every rank asks in the same order."""
    w = world()
    if size > w.size or w.size % size:
        pytest.skip(f"tensor size {size} needs a world whose size it divides (world has "
                    f"{w.size} ranks)")
    if size not in _groups:
        _groups[size] = w.split(w.rank // size, key=w.rank % size, name=f"tp{size}")
    return _groups[size]


def to_float64(module):
    for p in module.parameters():
        p.data = p.data.astype(np.float64)
    return module


def expected_grad(layer, name, dense_grad):
    """The dense gradient of parameter ``name`` cut as the parallel ``layer`` holds it."""
    spec = getattr(layer, "tp_shard_specs", {}).get(name)
    if spec is None:
        return dense_grad
    return shard(dense_grad, spec, layer.comm.rank, layer.comm.size)


def excess(actual, expected, rtol):
    """max(|actual - expected| - rtol |expected|) (inf for a shape mismatch)."""
    actual = np.asarray(actual, np.float64)
    expected = np.asarray(expected, np.float64)
    if actual.shape != expected.shape:
        return np.inf
    return float(np.max(np.abs(actual - expected) - rtol * np.abs(expected), initial=0.0))


def agree_close(actual, expected, rtol=1e-10, atol=1e-12, what=""):
    """Assert ``actual`` ~ ``expected`` on every rank (the verdict is global)."""
    bad = excess(actual, expected, rtol)
    worst = world().allreduce(bad, "max")
    assert worst <= atol, f"{what}: worst excess error {worst:.3g} over the ranks (mine {bad:.3g})"


def agree_all_close(named_pairs, rtol=1e-10, atol=1e-12, what=""):
    """``agree_close`` over (name, actual, expected) triples that may differ in number
    between ranks (a pipeline stage's parameters): one collective for all of them."""
    worst_name, bad = "", 0.0
    for name, actual, expected in named_pairs:
        e = excess(actual, expected, rtol)
        if e > bad:
            worst_name, bad = name, e
    worst = world().allreduce(bad, "max")
    assert worst <= atol, (f"{what}: worst excess error {worst:.3g} over the ranks (mine "
                           f"{bad:.3g} at {worst_name or '-'})")


def agree(flag, what=""):
    """Assert a boolean on every rank (False anywhere fails everywhere)."""
    ok = world().allreduce(np.array([int(bool(flag))], np.int32), "min")[0]
    assert ok, what


def compare_module_grads(par, dense, rtol=1e-10, atol=1e-12):
    """Every parameter gradient of the parallel module equals the dense one's shard."""
    ref = dict(dense.named_parameters())
    owners = dict(par.named_modules())
    for name, p in par.named_parameters():
        path, _, leaf = name.rpartition(".")
        owner = owners[path] if path else par
        agree_close(p.grad.data, expected_grad(owner, leaf, ref[name].grad.data), rtol, atol,
                    f"gradient of {name}")


def seeded(build, seed=0):
    lz.manual_seed(seed)
    return build()
