"""The server end to end over loopback: tritonclient.http (a real KServe v2 client) for
the protocol, httpx for the requests a real client would never send."""
import concurrent.futures
import gzip
import json
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import lezero as lz
from lezero import nn
from lezero.serving import Padding, ServedModel, Server

httpx = pytest.importorskip("httpx")
th = pytest.importorskip("tritonclient.http")
from tritonclient.utils import InferenceServerException  # noqa: E402

pytestmark = pytest.mark.timeout(60)


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(2, 4, batch_first=True)
        self.head = nn.Linear(4, 3)

    def forward(self, x, mask=None):
        return self.head(self.lstm(x)[0])


def flaky(x):
    if x.sum() > 1e3:
        raise RuntimeError("the model broke")
    if x.sum() < -1e3:
        raise ValueError("flaky: inputs must not be that negative")
    return x * 2


@pytest.fixture(scope="module")
def models():
    lz.manual_seed(0)
    return {"mlp": nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)),
            "tagger": Tagger()}


@pytest.fixture(scope="module")
def server(models, tmp_path_factory):
    from tests.serving.test_loaders import make_onnx
    onnx_path = tmp_path_factory.mktemp("onnx") / "lin.onnx"
    make_onnx(onnx_path)
    served = {
        "mlp": models["mlp"],
        "tagger": ServedModel(models["tagger"], inputs=[("x", "FP32", [-1, 2])],
                              padding=Padding(axis=0, buckets=[4, 16])),
        "flaky": ServedModel(flaky, inputs=[("x", "FP32", [2])]),
        "lin": str(onnx_path),
    }
    with Server(served, port=0, max_delay_ms=2, max_body_bytes=64 << 10) as s:
        yield s


@pytest.fixture
def client(server):
    c = th.InferenceServerClient(f"127.0.0.1:{server.port}")
    yield c
    c.close()


def infer_input(name, array, binary=True):
    inp = th.InferInput(name, list(array.shape), th.np_to_triton_dtype(array.dtype))
    inp.set_data_from_numpy(array, binary_data=binary)
    return inp


def reference(model, x):
    with lz.no_grad(), lz.test_mode():
        return model(x).data


def test_health_and_metadata_through_tritonclient(client, server):
    assert client.is_server_live() and client.is_server_ready()
    assert client.is_model_ready("mlp") and client.is_model_ready("mlp", "1")
    assert client.get_server_metadata()["name"] == "lezero"
    meta = client.get_model_metadata("mlp")
    assert meta["inputs"] == [{"name": "input__0", "datatype": "FP32", "shape": [-1, 4]}]
    assert meta["outputs"] == [{"name": "output__0", "datatype": "FP32", "shape": [-1, 3]}]
    assert client.get_model_metadata("lin")["platform"] == "onnxruntime_onnx"
    index = client.get_model_repository_index()
    assert [m["name"] for m in index] == ["flaky", "lin", "mlp", "tagger"]
    config = client.get_model_config("mlp")
    assert config["max_batch_size"] == 32
    assert config["dynamic_batching"]["max_queue_delay_microseconds"] == 2000
    assert server.url == f"http://127.0.0.1:{server.port}" and server.port > 0


@pytest.mark.parametrize("binary", [True, False])
def test_infer_matches_the_model(client, models, binary):
    x = np.random.default_rng(1).standard_normal((5, 4)).astype(np.float32)
    result = client.infer("mlp", [infer_input("input__0", x, binary)],
                          outputs=[th.InferRequestedOutput("output__0", binary_data=binary)],
                          request_id="req-7")
    np.testing.assert_allclose(result.as_numpy("output__0"), reference(models["mlp"], x),
                               rtol=1e-6, atol=1e-7)
    assert result.get_response()["id"] == "req-7"


def test_onnx_model_served_from_a_path(client):
    x = np.ones((2, 4), np.float32)
    y = client.infer("lin", [infer_input("x", x)]).as_numpy("y")
    np.testing.assert_allclose(y, x @ (np.arange(12, dtype=np.float32).reshape(4, 3) / 10),
                               rtol=1e-6)


def test_concurrent_clients_are_batched_and_each_gets_its_answer(server, models):
    rng = np.random.default_rng(2)
    xs = [rng.standard_normal((1, 4)).astype(np.float32) for _ in range(48)]
    local = threading.local()

    def call(x):
        if not hasattr(local, "client"):
            local.client = th.InferenceServerClient(f"127.0.0.1:{server.port}")
        return local.client.infer("mlp", [infer_input("input__0", x)]).as_numpy("output__0")

    before = len(server.models["mlp"].batcher.records)
    with concurrent.futures.ThreadPoolExecutor(12) as pool:
        outs = list(pool.map(call, xs))
    for x, y in zip(xs, outs):
        np.testing.assert_allclose(y, reference(models["mlp"], x), rtol=1e-6, atol=1e-7)
    sizes = [r.size for r in server.models["mlp"].batcher.records[before:]]
    assert sum(sizes) == 48 and max(sizes) > 1


def test_variable_length_requests_are_padded_and_cut_back(client, server, models):
    rng = np.random.default_rng(3)
    xs = [rng.standard_normal((1, n, 2)).astype(np.float32) for n in (3, 11, 2, 7)]
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        outs = list(pool.map(lambda x: th.InferenceServerClient(
            f"127.0.0.1:{server.port}").infer("tagger", [infer_input("x", x)]), xs))
    for x, r in zip(xs, outs):
        y = r.as_numpy("output__0")
        assert y.shape == (1, x.shape[1], 3)
        np.testing.assert_allclose(y, reference(models["tagger"], x), rtol=1e-5, atol=1e-6)


def test_unknown_model_and_version_are_404(client):
    with pytest.raises(InferenceServerException, match="unknown model 'nope'") as info:
        client.get_model_metadata("nope")
    assert info.value.status() == "404"
    with pytest.raises(InferenceServerException, match="has no version '7'"):
        client.infer("mlp", [infer_input("input__0", np.zeros((1, 4), np.float32))],
                     model_version="7")


def test_model_errors_fail_the_request_and_the_server_keeps_serving(client):
    with pytest.raises(InferenceServerException, match="the model broke") as info:
        client.infer("flaky", [infer_input("x", np.full((1, 2), 1e4, np.float32))])
    assert info.value.status() == "500"
    with pytest.raises(InferenceServerException, match="rejected the input") as info:
        client.infer("flaky", [infer_input("x", np.full((1, 2), -1e4, np.float32))])
    assert info.value.status() == "400"
    ok = client.infer("flaky", [infer_input("x", np.ones((1, 2), np.float32))])
    np.testing.assert_array_equal(ok.as_numpy("output__0"), [[2, 2]])


def post(server, path, **kwargs):
    return httpx.post(server.url + path, timeout=10, **kwargs)


def tensor(name="input__0", shape=(1, 4), datatype="FP32", data=None):
    return {"name": name, "shape": list(shape), "datatype": datatype,
            "data": [0.0] * int(np.prod(shape)) if data is None else data}


@pytest.mark.parametrize("payload, status, match", [
    (b"{oops", 400, "not valid JSON"),
    (b'"just a string"', 400, "must be a JSON object"),
    ({"inputs": [tensor(shape=(1, 5))]}, 400, r"expected shape \[-1, 4\], got \[1, 5\]"),
    ({"inputs": [tensor(datatype="FP64")]}, 400, "expected datatype FP32, got FP64"),
    ({"inputs": [tensor(name="pixels")]}, 400, r"expected input\(s\) \['input__0'\]"),
    ({"inputs": [tensor(data=[1, 2])]}, 400, "needs 4 elements, got 2"),
    ({"inputs": [tensor()], "outputs": [{"name": "logits"}]}, 400, "unknown output 'logits'"),
    ({"inputs": [tensor()], "parameters": {"priority": -1}}, 400, "priority must be"),
    ({"inputs": [tensor()], "parameters": {"timeout": "soon"}}, 400, "timeout must be"),
    ({"inputs": [tensor(shape=(0, 4), data=[])]}, 400, "the batch is empty"),
])
def test_bad_requests_get_4xx_with_a_message(server, payload, status, match):
    kwargs = {"content": payload} if isinstance(payload, bytes) else {"json": payload}
    r = post(server, "/v2/models/mlp/infer", **kwargs)
    assert r.status_code == status
    assert list(r.json()) == ["error"]
    assert __import__("re").search(match, r.json()["error"]), r.json()


def test_oversized_bodies_are_413(server):
    big = {"inputs": [tensor(shape=(2000, 4))]}            # ~32 KB of JSON
    r = post(server, "/v2/models/mlp/infer", json=big)
    assert r.status_code == 400 and "2000 rows, more than the queue" in r.json()["error"]
    big = {"inputs": [tensor(shape=(8000, 4))]}            # ~128 KB of JSON > 64 KiB
    r = post(server, "/v2/models/mlp/infer", json=big)
    assert r.status_code == 413 and "over the server's limit" in r.json()["error"]
    bomb = gzip.compress(json.dumps(big).encode())          # small compressed, big inside
    r = post(server, "/v2/models/mlp/infer", content=bomb,
             headers={"Content-Encoding": "gzip"})
    assert r.status_code == 413 and "decompressed body" in r.json()["error"]
    assert post(server, "/v2/models/mlp/infer", json={"inputs": [tensor()]}).status_code == 200


def test_compressed_bodies(server):
    body = gzip.compress(json.dumps({"inputs": [tensor()]}).encode())
    r = post(server, "/v2/models/mlp/infer", content=body, headers={"Content-Encoding": "gzip"})
    assert r.status_code == 200 and r.json()["outputs"][0]["shape"] == [1, 3]
    r = post(server, "/v2/models/mlp/infer", content=b"garbage",
             headers={"Content-Encoding": "gzip"})
    assert r.status_code == 400 and "does not decompress" in r.json()["error"]
    r = post(server, "/v2/models/mlp/infer", content=b"{}", headers={"Content-Encoding": "br"})
    assert r.status_code == 415


def test_unknown_routes_and_methods_answer_in_the_error_form(server):
    r = httpx.get(server.url + "/v3/nothing")
    assert r.status_code == 404 and "error" in r.json()
    r = httpx.get(server.url + "/v2/models/mlp/infer")
    assert r.status_code == 405 and "error" in r.json()
    assert httpx.get(server.url + "/v2/models/nope/ready").status_code == 404


def test_metrics_count_requests_batches_and_padding(server, client):
    x = np.zeros((1, 4), np.float32)
    client.infer("mlp", [infer_input("input__0", x)])
    bad = httpx.post(server.url + "/v2/models/mlp/infer", content=b"{not json")
    assert bad.status_code == 400            # this test makes its own failed request
    text = httpx.get(server.url + "/metrics").text
    assert "# TYPE lezero_batch_size histogram" in text
    lines = dict(line.rsplit(" ", 1) for line in text.splitlines() if not line.startswith("#"))
    assert int(lines['lezero_requests_total{model="mlp",code="200"}']) >= 1
    assert int(lines['lezero_requests_total{model="mlp",code="400"}']) >= 1
    assert lines['lezero_queue_length{model="mlp"}'] == "0"
    assert float(lines['lezero_request_latency_seconds{model="mlp",quantile="0.99"}']) > 0
    assert int(lines['lezero_batch_size_count{model="mlp"}']) >= 1
    assert int(lines['lezero_batch_size_bucket{model="mlp",le="+Inf"}']) == \
        int(lines['lezero_batch_size_count{model="mlp"}'])


class Held:
    """A model held at a gate, to fill the queue and time requests out."""

    def __init__(self):
        self.gate = threading.Event()
        self.entered = threading.Event()

    def __call__(self, x):
        self.entered.set()
        assert self.gate.wait(20)
        return x + 1


def test_full_queue_is_503_and_queue_timeout_is_504():
    held = Held()
    served = ServedModel(held, inputs=[("x", "FP32", [1])], warmup=False, max_batch_size=1,
                         max_delay_ms=0, max_queue_size=1)
    with Server({"held": served}, port=0) as s:
        c = th.InferenceServerClient(f"127.0.0.1:{s.port}")
        x = np.zeros((1, 1), np.float32)
        pool = concurrent.futures.ThreadPoolExecutor(2)

        def infer_in_thread():
            return th.InferenceServerClient(f"127.0.0.1:{s.port}").infer(
                "held", [infer_input("x", x)])
        first = pool.submit(infer_in_thread)                        # runs, held
        assert held.entered.wait(10)
        with pytest.raises(InferenceServerException, match="waited .* past its timeout") \
                as info:
            c.infer("held", [infer_input("x", x)], timeout=50_000)  # 50 ms in the queue
        assert info.value.status() == "504"
        second = pool.submit(infer_in_thread)                       # fills the queue
        deadline = time.monotonic() + 10
        while s.models["held"].batcher.queue_length < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        r = httpx.post(s.url + "/v2/models/held/infer",
                       json={"inputs": [tensor("x", (1, 1))]}, timeout=10)
        assert r.status_code == 503 and r.headers["retry-after"] == "1"
        assert "queue full" in r.json()["error"]
        held.gate.set()
        assert first.result(10).as_numpy("output__0")[0, 0] == 1
        assert second.result(10).as_numpy("output__0")[0, 0] == 1
        pool.shutdown()
        c.close()


def test_stop_answers_requests_in_flight_then_refuses_connections():
    held = Held()
    served = ServedModel(held, inputs=[("x", "FP32", [1])], warmup=False)
    with Server({"held": served}, port=0) as s:
        url = s.url
        reply = {}
        t = threading.Thread(target=lambda: reply.setdefault("r", httpx.post(
            url + "/v2/models/held/infer", json={"inputs": [tensor("x", (1, 1))]},
            timeout=20)))
        t.start()
        assert held.entered.wait(10)
        stopper = threading.Thread(target=s.stop)
        stopper.start()
        time.sleep(0.3)
        held.gate.set()
        stopper.join(20)
        t.join(20)
    assert reply["r"].status_code == 200 and reply["r"].json()["outputs"][0]["data"] == [1]
    with pytest.raises(httpx.ConnectError):
        httpx.get(url + "/v2/health/live", timeout=2)


def test_a_busy_port_fails_at_start(server):
    with pytest.raises(OSError, match=f"cannot listen on 127.0.0.1:{server.port}"):
        Server({"m": lambda x: x}, port=server.port).start()


@pytest.mark.parametrize("models, error, match", [
    ([], TypeError, "models must be a dict"),
    ({}, ValueError, "models is empty"),
    ({"a b": lambda x: x}, ValueError, "model names may use"),
    ({"m": 3}, TypeError, "model 'm' must be a Module"),
])
def test_server_rejects_bad_models(models, error, match):
    with pytest.raises(error, match=match):
        Server(models)


def test_command_line_serves_a_file(tmp_path):
    from tests.serving.test_loaders import make_onnx
    make_onnx(tmp_path / "lin.onnx")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONPATH=root)
    proc = subprocess.Popen([sys.executable, "-m", "lezero.serving", "--model",
                             f"lin={tmp_path / 'lin.onnx'}:max_batch_size=4", "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    try:
        line = proc.stdout.readline()
        assert "serving lin at http://127.0.0.1:" in line, proc.stderr.read()
        url = line.split(" at ")[1].split(" ")[0]
        r = httpx.post(url + "/v2/models/lin/infer", timeout=10,
                       json={"inputs": [tensor("x", (1, 4), data=[1, 1, 1, 1])]})
        assert r.status_code == 200
        np.testing.assert_allclose(r.json()["outputs"][0]["data"], [1.8, 2.2, 2.6], rtol=1e-6)
        proc.send_signal(__import__("signal").SIGINT)
        out, _ = proc.communicate(timeout=20)
        assert proc.returncode == 0 and "stopped" in out
    finally:
        if proc.poll() is None:
            proc.kill()


def test_command_line_reports_bad_arguments(tmp_path):
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    proc = subprocess.run([sys.executable, "-m", "lezero.serving", "--model",
                           f"m={tmp_path / 'missing.npz'}"], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=root), timeout=60)
    assert proc.returncode == 2 and "does not exist" in proc.stderr


def test_triton_priority_and_timeout_parameters_map_to_the_batcher():
    from lezero.serving.app import _request_options
    assert _request_options({}) == (0, None)
    assert _request_options({"priority": 1}) == (0, None)      # the default ranks with 1
    assert _request_options({"priority": 3, "timeout": 50_000}) == (2, 50.0)   # us -> ms


@pytest.mark.gpu
def test_a_module_on_the_gpu_is_fed_its_inputs_there():
    model = nn.Linear(4, 2).to_gpu()
    with Server({"gpu": model}, port=0) as s:
        r = httpx.post(s.url + "/v2/models/gpu/infer", timeout=30,
                       json={"inputs": [tensor(shape=(3, 4), data=[1.0] * 12)]})
    assert r.status_code == 200, r.text
    w, b = lz.cuda.as_numpy(model.weight.data), lz.cuda.as_numpy(model.bias.data)
    np.testing.assert_allclose(np.array(r.json()["outputs"][0]["data"]).reshape(3, 2),
                               np.ones((3, 4)) @ w.T + b, rtol=1e-5)
