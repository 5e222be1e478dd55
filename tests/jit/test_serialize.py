"""StaticGraph.save / jit.load: the .lzg format, round trips, and damaged files."""
import json
import os
import subprocess
import sys
import zipfile

import numpy as np
import pytest

import lezero as lz
import lezero.functions as F
from lezero import jit, optim
from lezero.jit import GraphFormatError
from tests.jit.zoo import build, leaves

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize("name", ["lenet5", "char_lstm", "gpt", "seq2seq_transformer",
                                  "dcgan_discriminator"])
def test_round_trip_gives_the_same_outputs(tmp_path, name):
    model, xs = build(name)
    g = jit.trace(model, *xs)
    path = g.save(str(tmp_path / f"{name}.lzg"))
    loaded = jit.load(path)
    assert [n.op for n in loaded.graph.nodes] == [n.op for n in g.graph.nodes]
    with lz.no_grad():
        for a, b in zip(leaves(loaded(*xs)), leaves(model(*xs))):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_the_format_is_a_zip_of_json_and_safetensors(tmp_path):
    model, xs = build("mlp")
    path = jit.trace(model, *xs).save(str(tmp_path / "m.lzg"))
    with zipfile.ZipFile(path) as z:
        assert sorted(z.namelist()) == ["graph.json", "weights.safetensors"]
        doc = json.loads(z.read("graph.json"))
    assert doc["format"] == "lezero-graph" and doc["version"] == 1
    assert [n["op"] for n in doc["nodes"]][:2] == ["Linear", "Fused"] or \
        [n["op"] for n in doc["nodes"]][:2] == ["Linear", "ReLU"]
    assert "0.weight" in doc["params"]


def test_a_loaded_graph_runs_without_the_code_that_made_it(tmp_path):
    script = (
        "import numpy as np, lezero as lz, lezero.functions as F\n"
        "from lezero import jit\n"
        "class Net(lz.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__(); self.l = lz.nn.Linear(3, 2)\n"
        "    def forward(self, x):\n"
        "        return F.gelu(self.l(x)) * 2\n"
        "lz.manual_seed(0)\n"
        "net = Net().eval(); x = np.ones((1, 3), np.float32)\n"
        "jit.trace(net, x).save(r'%s')\n"
        "np.save(r'%s', net(x).data)\n") % (tmp_path / "n.lzg", tmp_path / "ref.npy")
    env = dict(os.environ, PYTHONPATH=ROOT)
    subprocess.run([sys.executable, "-c", script], check=True, env=env, cwd=str(tmp_path))
    g = jit.load(str(tmp_path / "n.lzg"))           # no class Net in this process
    np.testing.assert_allclose(g(np.ones((1, 3), np.float32)).data,
                               np.load(tmp_path / "ref.npy"), rtol=1e-6)


def test_loaded_parameters_fine_tune(tmp_path):
    model, xs = build("mlp")
    g = jit.load(jit.trace(model, *xs).save(str(tmp_path / "m.lzg")))
    opt = optim.SGD(g.parameters(), lr=0.1)
    losses = []
    for _ in range(5):
        opt.zero_grad()
        loss = F.mean(g(*xs) ** 2)
        loss.backward()
        opt.step()
        losses.append(float(loss.data))
    assert losses[-1] < losses[0]


def test_guards_survive_saving(tmp_path):
    model, xs = build("mlp")
    g = jit.load(jit.trace(model, *xs).save(str(tmp_path / "m.lzg")))
    with pytest.raises(jit.GuardError, match="shape"):
        g(np.ones((5, 8), np.float32))


def _saved(tmp_path):
    model, xs = build("mlp")
    return jit.trace(model, *xs).save(str(tmp_path / "m.lzg"))


def test_corrupt_and_truncated_files_are_clear_errors(tmp_path):
    path = _saved(tmp_path)
    data = open(path, "rb").read()
    bad = tmp_path / "bad.lzg"
    bad.write_bytes(b"not a graph at all")
    with pytest.raises(GraphFormatError, match="not a LeZero graph file or is truncated"):
        jit.load(str(bad))
    bad.write_bytes(data[: len(data) // 2])
    with pytest.raises(GraphFormatError, match="truncated or corrupt"):
        jit.load(str(bad))
    with pytest.raises(FileNotFoundError):
        jit.load(str(tmp_path / "missing.lzg"))


def _rewrite(path, out, doc_edit=None, weights=None):
    with zipfile.ZipFile(path) as z:
        doc, blob = json.loads(z.read("graph.json")), z.read("weights.safetensors")
    if doc_edit:
        doc_edit(doc)
    with zipfile.ZipFile(out, "w") as z:
        z.writestr("graph.json", json.dumps(doc))
        z.writestr("weights.safetensors", blob if weights is None else weights)
    return str(out)


def test_wrong_version_unknown_operator_and_bad_weights(tmp_path):
    path = _saved(tmp_path)
    v2 = _rewrite(path, tmp_path / "v2.lzg", lambda d: d.update(version=2))
    with pytest.raises(GraphFormatError, match="format version 2; this LeZero reads version 1"):
        jit.load(v2)
    unknown = _rewrite(path, tmp_path / "op.lzg",
                       lambda d: d["nodes"][0].update(op="Teleport"))
    with pytest.raises(GraphFormatError, match="node 0 uses operator 'Teleport'"):
        jit.load(unknown)
    short = _rewrite(path, tmp_path / "w.lzg", weights=b"\x08\x00\x00\x00\x00\x00\x00\x00{}")
    with pytest.raises(GraphFormatError, match="corrupt"):
        jit.load(short)
