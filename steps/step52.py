"""Step 52: replay for training, and save the graph to a file.

The replay runs on raw arrays when no gradient is wanted.  When one is (a parameter or
an input requires it and grad mode is on), it calls the same Functions on Variables, so
the autograd engine records the replayed graph and ``backward`` gives exactly the
gradients of eager execution; an optimizer then trains the module through its graph.
``StaticGraph.save`` writes a ``.lzg`` file (a zip of the graph as JSON and the weights
as safetensors) that ``jit.load`` runs without the Python class that defined the model.
Run: python steps/step52.py
"""
import os
import tempfile

import numpy as np

import lezero as lz
import lezero.functions as F
from lezero import jit, nn, optim


def main():
    lz.manual_seed(0)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 2)).astype(np.float32)
    t = (x[:, :1] * x[:, 1:] > 0).astype(np.float32)         # XOR of the signs
    model = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 1))
    graph = jit.trace(model, x)
    opt = optim.Adam(model.parameters(), lr=0.05)
    for step in range(151):
        loss = F.binary_cross_entropy_with_logits(graph(x), t)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 50 == 0:
            print(f"step {step:3d}  loss {float(loss.data):.4f}")

    model.zero_grad()
    F.binary_cross_entropy_with_logits(model(x), t).backward()
    eager = [p.grad.data.copy() for p in model.parameters()]
    model.zero_grad()
    F.binary_cross_entropy_with_logits(graph(x), t).backward()
    worst = max(np.abs(p.grad.data - e).max() for p, e in zip(model.parameters(), eager))
    print(f"gradients, static vs eager: max difference {worst:.1e}")

    with tempfile.TemporaryDirectory() as tmp:
        path = graph.save(os.path.join(tmp, "xor.lzg"))
        print(f"saved {os.path.basename(path)}: {os.path.getsize(path)} bytes")
        loaded = jit.load(path)
        with lz.no_grad():
            acc = float(((loaded(x).data > 0) == (t > 0.5)).mean())
    print(f"the loaded graph classifies {acc:.0%} of the training points")


if __name__ == "__main__":
    main()
