"""The worked new chip (examples/backend_plugin): its entry point is found through
``importlib.metadata`` like an installed package's, it refuses float64, and the zoo's
LeNet and GPT-mini train on it.  ``make test`` also runs the conformance suite on it."""
import os
import sys
import tomllib
from importlib import metadata

import numpy as np
import pytest

import lezero.functions as F
from lezero import backends, cuda, optim
from lezero.backends import registry
from lezero.nn.models.gpt import GPT
from lezero.nn.models.lenet import LeNet5

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLUGIN = os.path.join(ROOT, "examples", "backend_plugin")


def _fake_install(site):
    """A ``*.dist-info`` for the plugin in ``site`` (what ``pip install`` would write):
    its entry points read from the plugin's pyproject.toml."""
    with open(os.path.join(PLUGIN, "pyproject.toml"), "rb") as f:
        project = tomllib.load(f)["project"]
    info = site / f"lezero_f32chip-{project['version']}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {project['name']}\n"
                                   f"Version: {project['version']}\n")
    lines = [f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items())
             for group, eps in project["entry-points"].items()]
    (info / "entry_points.txt").write_text("\n".join(lines))


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """The plugin as if pip-installed, and a registry that has not scanned yet."""
    _fake_install(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.syspath_prepend(PLUGIN)
    monkeypatch.setattr(registry, "_loaded", dict(registry._loaded))
    monkeypatch.setattr(registry, "_plugins", {})
    monkeypatch.setattr(registry, "_by_type", {})
    monkeypatch.setattr(registry, "_types_cache", [None, (np.ndarray,)])
    monkeypatch.setattr(registry, "_scanned", False)
    yield
    sys.modules.pop("lezero_f32chip", None)


@pytest.fixture
def chip(installed, monkeypatch):
    monkeypatch.setenv("LEZERO_BACKEND", "f32chip")
    return backends.get("f32chip")


def test_the_entry_point_is_discovered_through_importlib_metadata(installed):
    found = {ep.name: ep for ep in metadata.entry_points(group=backends.ENTRY_POINT_GROUP)}
    assert found["f32chip"].value == "lezero_f32chip:F32Chip"
    assert "f32chip" in backends.available() and "lezero_f32chip" not in sys.modules
    chip = backends.get("f32chip")              # loaded on first use
    assert type(chip).__name__ == "F32Chip" and chip.name == "f32chip"
    assert "float64" not in chip.capabilities.dtypes
    assert chip.capabilities.widest_float == "float32"


def test_the_chip_refuses_float64_wherever_it_would_appear(chip):
    with pytest.raises(TypeError, match="f32chip: the device has no float64"):
        chip.from_host(np.ones(3))
    with pytest.raises(TypeError, match="f32chip: the device has no float64"):
        chip.xp.zeros(3)                        # NumPy's default dtype
    a = chip.from_host(np.ones(3, np.float32))
    with pytest.raises(TypeError, match="f32chip: the device has no float64"):
        a.astype(np.float64)
    b = a * 2.0 + chip.xp.arange(3, dtype=np.float32)
    assert backends.get_backend(b) is chip and b.dtype == np.float32
    assert cuda.as_numpy(b).tolist() == [2.0, 3.0, 4.0]
    draws = chip.rng(0).standard_normal(4)
    assert draws.dtype == np.float32 and backends.get_backend(draws) is chip


def _train(model, x, t, logits_of, steps=6):
    model.to_gpu()                              # LEZERO_BACKEND=f32chip
    x, t = cuda.as_cupy(x), cuda.as_cupy(t)
    opt = optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(steps):
        loss = F.cross_entropy(logits_of(model(x)), t)
        model.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def test_lenet_trains_on_the_chip(chip):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 1, 28, 28)).astype(np.float32)
    model = LeNet5(input_size=28)
    losses = _train(model, x, rng.integers(0, 10, 8), lambda out: out)
    assert all(isinstance(p.data, chip.array_types) for p in model.parameters())
    assert losses[-1] < 0.8 * losses[0], losses


def test_gpt_mini_trains_on_the_chip(chip):
    ids = np.random.default_rng(0).integers(0, 32, (4, 8))
    model = GPT(vocab_size=32, block_size=8, n_layer=1, n_head=2, d_model=32)
    losses = _train(model, ids, np.roll(ids, -1, axis=1).reshape(-1),
                    lambda out: out.reshape(-1, 32))
    assert losses[-1] < 0.9 * losses[0], losses
