"""The places that used to branch on ``cupy`` now ask ``lezero.backends``: checked on the
strict device (which is neither NumPy nor CuPy, so a leftover ``else: cupy`` fails)."""
import pathlib
import re

import numpy as np
import pytest

import lezero as lz
import lezero.functions as F
from lezero import backends, cuda, nn
from lezero import random as lz_random
from lezero.backends.strict import counters

STRICT = backends.get("strict")


def _dev(a):
    return STRICT.from_host(np.asarray(a))


def test_devices_in_use_lists_strict_once_loaded_and_never_numpy():
    names = [b.name for b in backends.devices_in_use()]
    assert "strict" in names and "numpy" not in names
    assert all(b.is_available() for b in backends.devices_in_use())


def test_wire_stages_or_synchronizes_through_the_backend():
    from lezero.parallel import wire
    a = _dev(np.arange(6, dtype=np.float32).reshape(2, 3))
    staged = wire.to_wire(a, np.dtype(np.float64), False, cuda_aware=False)
    assert type(staged) is np.ndarray and staged.dtype == np.float64
    with counters.count() as c:
        direct = wire.to_wire(a, np.dtype(np.float32), False, cuda_aware=True)
    assert isinstance(direct, STRICT.array_types) and (c.syncs, c.d2h) == (1, 0)
    assert isinstance(wire.empty_wire((2,), np.float32, STRICT.xp, True), STRICT.array_types)
    assert type(wire.empty_wire((2,), np.float32, STRICT.xp, False)) is np.ndarray
    back = wire.from_wire(staged, np.float32, False, STRICT.xp)
    assert isinstance(back, STRICT.array_types)
    np.testing.assert_array_equal(cuda.as_numpy(back), np.arange(6).reshape(2, 3))


def test_static_graph_and_conv_problems_name_the_backend():
    from lezero.functions.conv.autotune import _xp
    from lezero.functions.conv.functions import problem
    from lezero.functions.conv.geometry import conv_geometry
    from lezero.jit.static_graph import signature_of
    a = _dev(np.zeros((1, 2, 4, 4), np.float32))
    sig = signature_of([a, np.zeros(2)])
    assert (sig[0][3], sig[1][3]) == ("strict", "numpy")
    geom = conv_geometry("conv", (1, 2, 4, 4), (3, 2, 3, 3), 2, 1, 0, 1, 1)
    prob = problem(geom, 1, 2, 3, a)
    assert prob.backend == "strict" and _xp(prob) is STRICT.xp
    host = problem(geom, 1, 2, 3, np.zeros(1, np.float32))
    assert host.backend == "numpy" and _xp(host) is np


def test_device_generators_are_swapped_and_restored():
    from lezero.parallel.tensor.rng import _restore_device_rngs, _swap_device_rngs
    before = lz_random.get_rng(STRICT.xp)
    saved = _swap_device_rngs(7)
    inside = lz_random.get_rng(STRICT.xp)
    assert inside is not before and saved["strict"] is before
    np.testing.assert_array_equal(cuda.as_numpy(inside.random(3)),
                                  cuda.as_numpy(STRICT.rng(7).random(3)))
    _restore_device_rngs(saved)
    assert lz_random.get_rng(STRICT.xp) is before


def test_checkpoint_replays_the_device_dropout_masks():
    lz_random.get_rng(STRICT.xp)                 # the device generator exists

    def block(x):
        return F.dropout(x * 2.0, 0.5)

    def grads(use_checkpoint):
        lz.manual_seed(3)
        lz_random.get_rng(STRICT.xp)
        x = lz.Variable(_dev(np.ones((8, 8), np.float32)))
        y = lz.checkpoint(block, x) if use_checkpoint else block(x)
        F.sum(y * y).backward()
        return cuda.as_numpy(y), cuda.as_numpy(x.grad)

    y, g = grads(True)
    assert 0 < (y == 0).sum() < y.size          # some dropped, some kept
    np.testing.assert_array_equal(g, 8 * y)     # 2y * dy/dx, the same mask both times


def test_memory_profiler_reads_the_device_pool():
    model = nn.Linear(64, 64).to_device("strict")
    x = _dev(np.ones((32, 64), np.float32))
    with lz.memory.profile(model) as prof:
        F.sum(model(x) * 2.0).backward()
    assert prof.peak_device_bytes >= 32 * 64 * 4


# ----- host paths chosen by the backend, not by ``xp is np`` ------------------------------

_NUMPY_COMPARISONS = re.compile(r"\b(xp\w*|get_array_module\([^)]*\)|xp_of\([^)]*\)) is (not )?np\b"
                                r"|\.name [!=]= \"numpy\"")


def test_no_code_outside_the_backends_compares_a_namespace_with_numpy():
    root = pathlib.Path(lz.__file__).parent
    found = [f"{path.relative_to(root)}:{n}" for path in sorted(root.rglob("*.py"))
             if "backends" not in path.relative_to(root).parts
             for n, line in enumerate(path.read_text().splitlines(), 1)
             if _NUMPY_COMPARISONS.search(line)]
    assert found == [], "ask the backend (get_backend(x).is_host / .kernel(...)): " + str(found)


def test_asarray_brings_a_value_from_anywhere():
    host = backends.get("numpy")
    d = _dev([1.5, 2.5])
    assert STRICT.asarray(d) is d and isinstance(STRICT.asarray([1, 2]), STRICT.array_types)
    c = STRICT.asarray(d, dtype=np.float64, copy=True)
    assert c is not d and c.dtype == np.float64
    back = host.asarray(d, dtype=np.float32, copy=True)
    assert type(back) is np.ndarray and back.dtype == np.float32 and back.tolist() == [1.5, 2.5]
    a = np.zeros(3)
    assert host.asarray(a) is a and host.asarray(a, copy=True) is not a
    assert host.is_host and not STRICT.is_host


def test_host_kernels_come_from_the_numpy_table_and_devices_run_the_reference():
    from lezero.kernels import host as host_kernels
    assert backends.get("numpy").kernel("stable_argsort", None) is host_kernels.stable_argsort
    assert STRICT.kernel("stable_argsort", len) is len
    ties = np.array([[3, 1, 3, 1, 2, 1]], np.float32)
    for descending in (False, True):
        want = F.argsort(ties, axis=1, descending=descending).data
        got = F.argsort(_dev(ties), axis=1, descending=descending).data
        np.testing.assert_array_equal(cuda.as_numpy(got), want)
    w = np.random.default_rng(0).standard_normal((6, 3)).astype(np.float32)
    idx, off = np.array([0, 5, 5, 2, 1]), np.array([0, 2, 2, 5])      # an empty bag
    want = F.embedding_bag(idx, w, off, mode="max").data
    got = F.embedding_bag(_dev(idx), _dev(w), _dev(off), mode="max").data
    np.testing.assert_array_equal(cuda.as_numpy(got), want)


def test_conv_scratch_is_pooled_on_the_host_and_fresh_on_a_device():
    from lezero.functions.conv.algorithm import scratch
    a = scratch("t", (2, 3), np.float32)
    b = scratch("t", (3, 2), np.float32)
    assert a.base is not None and a.base is b.base          # one host buffer, reused
    d = scratch("t", (2, 3), np.float32, STRICT.xp)
    assert isinstance(d, STRICT.array_types) and d.shape == (2, 3)


def test_manual_seed_seeds_every_device_without_drawing_from_numpy():
    lz_random.get_rng(STRICT.xp)
    lz.manual_seed(11)
    device_draws = cuda.as_numpy(lz_random.get_rng(STRICT.xp).random(3))
    np.testing.assert_array_equal(device_draws, cuda.as_numpy(STRICT.rng(11).random(3)))
    np.testing.assert_array_equal(lz_random.get_rng().random(3),
                                  np.random.default_rng(11).random(3))


def test_a_singular_matrix_on_a_device_is_an_error_for_one_sync():
    singular = _dev(np.ones((3, 3), np.float32))
    with counters.count() as c, pytest.raises(ValueError, match="inv: .*not finite"):
        F.inv(singular)         # the device answers nan, as cuSOLVER does
    assert c.syncs == 1
    with pytest.raises(ValueError, match="solve: .*not finite"):
        F.solve(singular, _dev(np.ones((3, 2), np.float32)))
