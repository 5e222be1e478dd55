"""The static graph ``examples/export_onnx.py`` writes is one a server answers with: traced
in eval mode, advertised with its per-sample shape, any batch size served.  A graph that
cannot serve is refused at load with the reason (the CLI: exit 2, one line)."""
import json
import os
import subprocess
import sys
import urllib.request

import numpy as np
import pytest

import lezero as lz
import lezero.functions as F
from lezero import jit, nn, serving
from lezero.nn.models import LeNet5

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENV = dict(os.environ, MPLBACKEND="Agg", OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
           NUMBA_NUM_THREADS="1")


def _infer(url, model, x):
    body = {"inputs": [{"name": "input__0", "datatype": "FP32", "shape": list(x.shape),
                        "data": x.ravel().tolist()}]}
    request = urllib.request.Request(f"{url}/v2/models/{model}/infer",
                                     data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as answer:
        out = json.load(answer)["outputs"][0]
    return np.array(out["data"], np.float32).reshape(out["shape"])


def test_the_export_examples_graph_answers_infer_requests(tmp_path):
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "export_onnx.py"),
                           "--smoke", "--out", str(out)], cwd=tmp_path, env=ENV,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    served = serving.load_model(out / "model.lzg")
    net = LeNet5(num_classes=10, in_channels=1, input_size=8)
    net.load(str(out / "model.npz"))
    x = np.random.default_rng(0).random((5, 1, 8, 8), dtype=np.float32)
    with lz.no_grad(), lz.test_mode():
        expected = net.eval()(x).data
    with serving.Server({"digits": served}, host="127.0.0.1", port=0) as server:
        with urllib.request.urlopen(f"{server.url}/v2/models/digits", timeout=60) as r:
            meta = json.load(r)
        assert meta["inputs"] == [{"name": "input__0", "datatype": "FP32",
                                   "shape": [-1, 1, 8, 8]}]
        np.testing.assert_allclose(_infer(server.url, "digits", x), expected, atol=1e-5)
        np.testing.assert_allclose(_infer(server.url, "digits", x[:1]), expected[:1],
                                   atol=1e-5)


def _mlp():
    lz.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)).eval()


def test_a_graph_serves_batches_larger_and_smaller_than_its_trace(tmp_path):
    model = _mlp()
    x = np.random.default_rng(1).standard_normal((9, 4)).astype(np.float32)
    with lz.test_mode():
        jit.trace(model, x[:4]).save(str(tmp_path / "g.lzg"))
    served = serving.load_model(tmp_path / "g.lzg")
    with lz.no_grad(), lz.test_mode():
        expected = model(x).data
        for n in (1, 4, 9):                    # padded, exact, two chunks and a padded one
            np.testing.assert_allclose(served.model(x[:n]), expected[:n], atol=1e-6)


@pytest.mark.parametrize("make,reason", [
    (lambda m, x: jit.trace(m.train(), x), "was traced in training mode"),
    (lambda m, x: jit.trace(lambda v: F.sum(m(v), axis=0), x), "cannot serve batches"),
    (lambda m, x: jit.trace(lambda v, k: m(v) * k, x, 2.0), "takes non-array arguments"),
])
def test_a_graph_that_cannot_serve_is_refused_at_load(make, reason, tmp_path):
    x = np.zeros((2, 4), np.float32)
    model = _mlp()
    if "training" in reason:
        make(model, x).save(str(tmp_path / "g.lzg"))
    else:
        with lz.test_mode():
            make(model, x).save(str(tmp_path / "g.lzg"))
    with pytest.raises(ValueError, match=reason):
        serving.load_model(tmp_path / "g.lzg")


def test_the_command_line_refuses_a_training_mode_graph_in_one_line(tmp_path):
    model = _mlp().train()
    jit.trace(model, np.zeros((2, 4), np.float32)).save(str(tmp_path / "g.lzg"))
    proc = subprocess.run([sys.executable, "-m", "lezero.serving", "--model",
                           f"g={tmp_path / 'g.lzg'}", "--port", "0"], cwd=tmp_path, env=ENV,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "traced in training mode" in lines[0], proc.stderr
    assert "lz.test_mode()" in lines[0]
