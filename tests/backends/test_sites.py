"""The places that used to branch on ``cupy`` now ask ``lezero.backends``: checked on the
strict device (which is neither NumPy nor CuPy, so a leftover ``else: cupy`` fails)."""
import numpy as np

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
