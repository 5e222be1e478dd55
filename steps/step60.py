"""Step 60: dynamic batching, and a server that standard clients can talk to.

A model answers one sample about as fast as it answers thirty: the weights are read once
per call either way.  A ``DynamicBatcher`` takes single requests from many threads,
holds each at most ``max_delay_ms``, runs them through the model as one batch and hands
every caller its own row.  Samples of different lengths are padded into a batch (the
model gets a mask), grouped in length buckets so little work is spent on padding, and
cut back afterwards.  ``serving.Server`` puts the batcher behind HTTP with the KServe v2
protocol that Triton's and KServe's clients speak; here a plain ``urllib`` request shows
the JSON on the wire.
Run: python steps/step60.py
"""
import concurrent.futures
import json
import urllib.request

import numpy as np

try:                                     # the serve extra, checked before any work
    import starlette  # noqa: F401
    import uvicorn  # noqa: F401
except ImportError as e:
    raise SystemExit(f"step60.py needs {e.name}: pip install -e \".[serve]\" in the "
                     "checkout (or make install)") from None

import lezero as lz
from lezero import nn, serving

lz.manual_seed(54)
model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10)).eval()
rng = np.random.default_rng(54)
images = rng.random((48, 64), dtype=np.float32)

# 1. Sixteen threads send 48 single images; the batcher merges them.
with serving.DynamicBatcher(model, max_batch_size=16, max_delay_ms=5) as batcher:
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(lambda x: batcher.submit(x).result(), images))
with lz.no_grad():
    expected = model(images).data
print("every caller got its own row:", np.allclose(np.stack(answers), expected, atol=1e-6))
print("batches (size, why sent):", [(r.size, r.reason) for r in batcher.records])

# 2. Sequences of 2..40 steps: one queue padded to the longest vs length buckets.
def summed(x, mask):                    # one number per position; padding is masked
    return (x * mask[:, :, None]).sum(axis=2)

seqs = [rng.random((n, 3), dtype=np.float32) for n in rng.integers(2, 41, 64)]
for buckets in (None, [8, 16, 32]):
    padding = serving.Padding(axis=0, buckets=buckets)
    with serving.DynamicBatcher(summed, max_batch_size=16, max_delay_ms=20,
                                padding=padding) as batcher:
        futures = [batcher.submit(s) for s in seqs]
        out = [f.result() for f in futures]
    exact = all(np.allclose(y, s.sum(axis=1)) for y, s in zip(out, seqs))
    stats = batcher.stats()
    print(f"buckets {buckets}: {stats['batches']} batches, padding waste "
          f"{stats['padding_waste']:.0%}, results cut back exactly: {exact}")

# 3. The same model behind HTTP; a client request in the KServe v2 JSON form.
with serving.Server({"digits": model}, port=0) as server:
    request = {"id": "step60", "inputs": [{"name": "input__0", "shape": [2, 64],
                                           "datatype": "FP32", "data": images[:2].tolist()}]}
    print("POST /v2/models/digits/infer", json.dumps(request)[:90], "...")
    req = urllib.request.Request(f"{server.url}/v2/models/digits/infer",
                                 data=json.dumps(request).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        reply = json.loads(r.read())
    out = reply["outputs"][0]
    logits = np.array(out["data"], dtype=np.float32).reshape(out["shape"])
    print("reply:", {k: reply[k] for k in ("model_name", "id")}, out["name"], out["shape"],
          "matches the model:", np.allclose(logits, expected[:2], atol=1e-5))
    with urllib.request.urlopen(f"{server.url}/v2/models/digits", timeout=10) as r:
        print("metadata:", json.loads(r.read())["inputs"])
    with urllib.request.urlopen(f"{server.url}/metrics", timeout=10) as r:
        lines = [ln for ln in r.read().decode().splitlines()
                 if ln.startswith(("lezero_requests_total", "lezero_batch_size_count"))]
    print("metrics:", lines)
