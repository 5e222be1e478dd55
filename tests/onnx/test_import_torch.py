"""onnx.load on files torch.onnx.export writes (TorchScript exporter, opset 17) from
PyTorch models built here: outputs equal PyTorch's, and gradients reach the
initializers as they reach PyTorch's parameters."""
import warnings

import numpy as np
import pytest

pytest.importorskip("onnx")
torch = pytest.importorskip("torch")

import lezero as lz  # noqa: E402
import lezero.functions as F  # noqa: E402
from lezero import onnx as lonnx  # noqa: E402

tn = torch.nn


class LM(tn.Module):
    def __init__(self):
        super().__init__()
        self.e, self.rnn, self.d = tn.Embedding(11, 8), tn.LSTM(8, 16, batch_first=True), \
            tn.Linear(16, 11)

    def forward(self, x):
        return self.d(self.rnn(self.e(x))[0])


class BiGRU(tn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = tn.GRU(8, 16, num_layers=2, bidirectional=True)

    def forward(self, x):
        return self.rnn(x)


class Attention(tn.Module):
    """A GPT-style block: layer norm, causal attention, GELU, residual."""

    def __init__(self):
        super().__init__()
        self.ln, self.qkv, self.o = tn.LayerNorm(16), tn.Linear(16, 48), tn.Linear(16, 16)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = [t.view(B, T, 2, 8).transpose(1, 2) for t in self.qkv(self.ln(x)).split(16, -1)]
        a = (q @ k.transpose(-2, -1)) / 8 ** 0.5
        a = a.masked_fill(~torch.tril(torch.ones(T, T)).bool(), float("-inf")).softmax(-1)
        return tn.functional.gelu(self.o((a @ v).transpose(1, 2).reshape(B, T, C))) + x


def _cases():
    torch.manual_seed(0)          # the layers' initial weights: the same in every worker
    g = torch.Generator().manual_seed(0)
    r = lambda *s: torch.randn(*s, generator=g)       # noqa: E731
    return {
        "mlp": (tn.Sequential(tn.Linear(8, 16), tn.ReLU(), tn.Linear(16, 4)), [r(2, 8)]),
        "cnn_bn": (tn.Sequential(tn.Conv2d(1, 4, 3, padding=1), tn.BatchNorm2d(4), tn.ReLU(),
                                 tn.MaxPool2d(2), tn.Conv2d(4, 8, 3, stride=2), tn.ReLU(),
                                 tn.AdaptiveAvgPool2d(1), tn.Flatten(), tn.Linear(8, 3)),
                   [r(2, 1, 12, 12)]),
        "bn1d": (tn.Sequential(tn.Linear(8, 8), tn.BatchNorm1d(8), tn.Tanh(), tn.Dropout(0.2),
                               tn.Linear(8, 2), tn.Sigmoid()), [r(3, 8)]),
        "lstm_lm": (LM(), [torch.randint(0, 11, (2, 5), generator=g)]),
        "bigru": (BiGRU(), [r(5, 2, 8)]),
        "attention": (Attention(), [r(2, 5, 16)]),
        "dcgan_g": (tn.Sequential(tn.ConvTranspose2d(4, 8, 4, 1, 0, bias=False),
                                  tn.BatchNorm2d(8), tn.ReLU(),
                                  tn.ConvTranspose2d(8, 1, 4, 2, 1, bias=False), tn.Tanh()),
                    [r(2, 4, 1, 1)]),
        "dcgan_d": (tn.Sequential(tn.Conv2d(1, 4, 4, 2, 1), tn.LeakyReLU(0.2),
                                  tn.Conv2d(4, 1, 4, 1, 0), tn.Flatten(), tn.Sigmoid()),
                    [r(2, 1, 8, 8)]),
        "pool_act": (tn.Sequential(tn.AvgPool2d(3, stride=2, padding=1), tn.Hardswish(),
                                   tn.ReLU6(), tn.Softplus(), tn.ELU(), tn.SiLU(), tn.Flatten(),
                                   tn.Softmax(-1)), [r(2, 2, 6, 6)]),
    }


CASES = _cases()


def _export(tmp_path, name):
    model, xs = CASES[name]
    model.eval()
    path = str(tmp_path / f"{name}.onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, tuple(xs), path, dynamo=False, opset_version=17)
    return model, xs, lonnx.load(path)


def _tuple(x):
    return x if isinstance(x, tuple) else (x,)


@pytest.mark.parametrize("name", sorted(CASES))
def test_outputs_equal_pytorch(tmp_path, name):
    model, xs, net = _export(tmp_path, name)
    with torch.no_grad():
        ref = _tuple(model(*xs))
    with lz.no_grad():
        out = _tuple(net(*[x.numpy() for x in xs]))
    assert len(out) == len(ref)
    for a, b in zip(out, ref):
        np.testing.assert_allclose(a.data, b.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["mlp", "lstm_lm", "attention", "dcgan_d"])
def test_gradients_reach_the_initializers_as_in_pytorch(tmp_path, name):
    model, xs, net = _export(tmp_path, name)
    model.zero_grad()
    (model(*xs) ** 2).sum().backward()
    (F.sum(net(*[x.numpy() for x in xs]) ** 2)).backward()
    torch_grads = {n: p.grad.numpy() for n, p in model.named_parameters()}
    compared = 0
    for attr, p in net.named_parameters():
        assert p.grad is not None, f"{attr} got no gradient"
        name_in_torch = net.onnx_names[attr]
        if name_in_torch in torch_grads:
            np.testing.assert_allclose(p.grad.data, torch_grads[name_in_torch],
                                       rtol=1e-4, atol=1e-5)
            compared += 1
    assert compared >= 2


def test_an_imported_model_fine_tunes(tmp_path):
    from lezero import optim
    _, xs, net = _export(tmp_path, "mlp")
    x = xs[0].numpy()
    # A target far from the initial outputs, so the loss has somewhere to fall (against
    # zeros the initial loss was ~0.007 and Adam's first steps overshot it).
    target = np.linspace(-2, 2, 8, dtype=np.float32).reshape(2, 4)
    opt = optim.Adam(net.parameters(), lr=0.01)
    losses = []
    for _ in range(30):
        opt.zero_grad()
        loss = F.mse_loss(net(x), target)
        loss.backward()
        opt.step()
        losses.append(float(loss.data))
    assert losses[-1] < 0.5 * losses[0]
    assert all(b < a for a, b in zip(losses, losses[1:]))      # it falls at every step
