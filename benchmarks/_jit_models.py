"""The models bench_jit.py and bench_onnx.py time: LeZero zoo models and PyTorch twins
with the same layout and the same weights (outputs checked equal before timing)."""
import numpy as np

CASES = ("mlp_b1", "mlp_b64", "lenet_b8", "resnet18_b2", "gpt_mini")
GPT = dict(vocab_size=65, block_size=64, n_layer=2, n_head=4, d_model=128)


def lezero_case(name):
    """(model in eval mode, example inputs)."""
    import lezero as lz
    from lezero.nn import models as M
    lz.manual_seed(0)
    rng = np.random.default_rng(0)
    if name.startswith("mlp"):
        batch = int(name.split("_b")[1])
        return M.MLP(784, [512, 512, 10]).eval(), [rng.standard_normal((batch, 784), np.float32)]
    if name == "lenet_b8":
        return M.LeNet5().eval(), [rng.standard_normal((8, 1, 32, 32), np.float32)]
    if name == "resnet18_b2":
        return M.resnet18(num_classes=10).eval(), [rng.standard_normal((2, 3, 32, 32),
                                                                       np.float32)]
    model = M.GPT(M.GPTConfig(**GPT)).eval()
    return model, [rng.integers(0, GPT["vocab_size"], (4, GPT["block_size"]))]


def torch_twin(name, state_dict):
    """The PyTorch model of ``name`` holding ``state_dict`` (NumPy arrays)."""
    import torch
    from torch import nn
    if name.startswith("mlp"):
        # lezero.nn.models.MLP is torchvision's MLP: Linear, ReLU, Dropout per layer
        model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Dropout(0.0),
                              nn.Linear(512, 512), nn.ReLU(), nn.Dropout(0.0),
                              nn.Linear(512, 10), nn.Dropout(0.0))
    elif name == "lenet_b8":
        model = _TorchLeNet()
    elif name == "resnet18_b2":
        from lezero.testing.oracles import import_torchvision
        model = import_torchvision().models.resnet18(num_classes=10)
    else:
        model = _torch_gpt()
    model.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in state_dict.items()})
    return model.eval()


def _torch_lenet_class():
    from torch import nn

    class LeNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(nn.Conv2d(1, 6, 5), nn.ReLU(), nn.MaxPool2d(2),
                                          nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2))
            self.classifier = nn.Sequential(nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84),
                                            nn.ReLU(), nn.Linear(84, 10))

        def forward(self, x):
            return self.classifier(self.features(x).flatten(1))
    return LeNet


def _TorchLeNet():
    return _torch_lenet_class()()


def _torch_gpt():
    from bench_gpt_mini import torch_gpt
    return torch_gpt(GPT["vocab_size"], GPT["block_size"], GPT["n_layer"], GPT["n_head"],
                     GPT["d_model"])


def timed(ctx, fn, *args):
    """A zero-argument function running ``fn(*args)`` inside the context ``ctx()``."""
    def run():
        with ctx():
            fn(*args)
    return run


def start(header, ratios):
    """Threads as _common sets them, the rounds, and the printed header; returns
    (threads, rounds)."""
    import os
    from _common import limit_threads, set_threads
    threads = set_threads()
    limit_threads(threads)
    rounds = int(os.environ.get("BENCH_ROUNDS", 30))
    print(f"threads: {threads}; best of {rounds} alternating rounds; inference")
    print(f"\n{'case':<12}" + "".join(f"{h:>17}" for h in header)
          + "".join(f"{r:>14}" for r in ratios))
    return threads, rounds


def best_row(name, fns, rounds, header, ratios):
    """Time ``fns`` in alternating rounds; print one row with ``ratios`` (pairs of column
    names: first / second)."""
    from _common import _fmt, interleaved_times
    best = dict(zip(fns, (min(t) for t in interleaved_times(list(fns.values()),
                                                            rounds=rounds))))
    print(f"{name:<12}" + "".join(f"{_fmt(best[h]):>17}" for h in header)
          + "".join(f"{best[a] / best[b]:>14.2f}" for a, b in ratios))
    return best


def check_same(a, b, what, tol=1e-4):
    a, b = np.asarray(a), np.asarray(b)
    diff = float(np.max(np.abs(a - b)))
    assert diff <= tol * max(1.0, float(np.max(np.abs(b)))), f"{what}: outputs differ by {diff}"
    return diff
