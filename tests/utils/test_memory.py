"""lz.memory: exact saved-for-backward accounting, listings, per-module peaks, live bytes."""

import numpy as np
import pytest

import lezero as lz
import lezero.functions as F
from lezero import amp, nn
from lezero.utils import memory


def _x(*shape, grad=False):
    return lz.Variable(np.ones(shape, np.float32), requires_grad=grad)


def test_saved_bytes_are_exact_and_released_with_the_graph():
    lin = nn.Linear(8, 16)
    x = _x(4, 8)
    with memory.profile() as prof:
        y = F.relu(lin(x))
        loss = y.sum()
        # x (128 B) kept by Linear, y (256 B) by ReLU (its output) and Sum; the linear
        # output is not kept (ReLU holds it as an InputRef, no array)
        assert prof.activation_bytes == 128 + 256
        assert prof.saved_bytes == 384 + lin.weight.data.nbytes + lin.bias.data.nbytes
        loss.backward()
        del y, loss
    assert prof.saved_bytes == 0 and prof.activation_bytes == 0
    assert prof.peak_activation_bytes == 384
    assert prof.peak_live_bytes >= 384


def test_views_and_shared_buffers_are_counted_once():
    x = _x(100, 10, grad=True)
    with memory.profile() as prof:
        a, b = x[:50], x[50:]           # two GetItems keep x; a and b are views of it
        c = F.tanh(x.reshape(1000))     # Reshape keeps x, Tanh a view of x
        total = a.sum() + b.sum() + c.sum()
        # x once (4000 B, a leaf: counted as a parameter), c (4000 B); the scalars the
        # Adds sum are not kept (an Add's gradient needs shapes only)
        assert prof.saved_bytes == 4000 + 4000
        assert prof.activation_bytes == 4000
        roles = {(r.op, r.role) for r in prof.saved(parameters=True)}
    del total
    assert ("GetItem", "input 0") in roles and ("Sum", "input 0") in roles


def test_listing_names_the_operator_shape_and_dtype(capsys):
    lin = nn.Linear(3, 5)
    rows = memory.saved_residuals(lambda v: F.gelu(lin(v)).mean(), _x(2, 3))
    got = {(r.op, r.role, r.shape, r.dtype) for r in rows}
    assert ("Linear", "input 0", (2, 3), "float32") in got
    assert ("GELU", "input 0", (2, 5), "float32") in got
    assert all(not r.parameter for r in rows)
    memory.print_saved_residuals(lambda v: F.gelu(lin(v)).mean(), _x(2, 3))
    out = capsys.readouterr().out
    assert "float32[2, 3]" in out and "input 0 of Linear" in out and "total saved now" in out


def test_autocast_halves_what_linear_layers_keep():
    layers = []
    for _ in range(6):
        layers += [nn.Linear(64, 64), nn.ReLU()]
    model = nn.Sequential(*layers)
    x = _x(64, 64)
    peaks = []
    for enabled in (False, True):
        with memory.profile() as prof:
            with amp.autocast(enabled=enabled):
                loss = model(x).mean()
            loss.backward()
        # the float32 input batch is kept either way (by the first Linear, or its cast)
        peaks.append(prof.peak_activation_bytes - x.data.nbytes)
    # float32: the 6 ReLU outputs of 16 KiB (each Linear's output is not kept: its ReLU
    # keeps its own output); float16: about half (and the input's float16 copy)
    assert peaks[0] == 6 * 16384
    assert peaks[1] < 0.6 * peaks[0]


def test_per_module_and_per_checkpointed_block():
    lz.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
    x = _x(3, 4)
    with memory.profile(model) as prof:
        y = model(x)
    by = prof.by_module()
    assert by["0"] == 3 * 4 * 4 and by["1"] == 3 * 8 * 4 and by["2"] == 3 * 8 * 4
    assert by[""] == prof.peak_activation_bytes
    del y

    block = nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 4))

    def body(v):
        return block(v)
    with memory.profile() as prof:
        lz.checkpoint(body, x).sum().backward()
    assert prof.by_module()["checkpoint:body"] > 0


def test_measure_and_plot(tmp_path):
    model = nn.Sequential(nn.Linear(4, 4), nn.Tanh())
    stats = memory.measure(lambda: model(_x(2, 4)).sum())
    assert stats["peak_activation_bytes"] == 2 * 4 * 4 * 3     # x, linear out, tanh out
    with pytest.raises(TypeError, match="must return a Variable"):
        memory.measure(lambda: 1.0)
    path = memory.plot_memory_vs_depth([4, 16, 64], {"plain": [2 ** 20, 4 * 2 ** 20, 2 ** 24],
                                                     "sqrt": [2 ** 20, 2 ** 21, 2 ** 22]},
                                       str(tmp_path / "depth.png"))
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    assert memory.format_bytes(1536) == "1.5 KiB" and lz.memory is memory


@pytest.mark.gpu
def test_cupy_through_the_same_interface():
    import cupy
    lin = nn.Linear(64, 64)
    lin.to_gpu()
    x = lz.Variable(cupy.ones((32, 64), np.float32), requires_grad=False)
    with memory.profile() as prof:
        y = F.relu(lin(x))
        assert prof.activation_bytes == 2 * 32 * 64 * 4
        y.sum().backward()
    assert prof.peak_device_bytes >= 2 * 32 * 64 * 4
