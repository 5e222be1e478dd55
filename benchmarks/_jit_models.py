"""The models bench_jit.py and bench_onnx.py time: LeZero zoo models and PyTorch twins
with the same layout and the same weights (outputs checked equal before timing)."""
import numpy as np

CASES = ("mlp_b1", "mlp_b64", "lenet_b8", "gpt_mini")
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
    import torch
    from torch import nn
    F = nn.functional
    d, heads, vocab, block = GPT["d_model"], GPT["n_head"], GPT["vocab_size"], GPT["block_size"]

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.attn, self.mlp = nn.Module(), nn.Module()
            self.attn.c_attn, self.attn.c_proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.mlp.c_fc, self.mlp.c_proj = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x):
            B, T, C = x.shape
            q, k, v = (t.view(B, T, heads, C // heads).transpose(1, 2)
                       for t in self.attn.c_attn(self.ln_1(x)).split(C, dim=2))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.attn.c_proj(y.transpose(1, 2).reshape(B, T, C))
            return x + self.mlp.c_proj(F.gelu(self.mlp.c_fc(self.ln_2(x))))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.transformer = nn.ModuleDict(dict(
                wte=nn.Embedding(vocab, d), wpe=nn.Embedding(block, d),
                h=nn.ModuleList([Block() for _ in range(GPT["n_layer"])]),
                ln_f=nn.LayerNorm(d)))
            self.lm_head = nn.Linear(d, vocab, bias=False)
            self.transformer.wte.weight = self.lm_head.weight

        def forward(self, i):
            tr = self.transformer
            x = tr.wte(i) + tr.wpe(torch.arange(i.shape[1]))
            for b in tr.h:
                x = b(x)
            return self.lm_head(tr.ln_f(x))
    return Model()


def check_same(a, b, what, tol=1e-4):
    a, b = np.asarray(a), np.asarray(b)
    diff = float(np.max(np.abs(a - b)))
    assert diff <= tol * max(1.0, float(np.max(np.abs(b)))), f"{what}: outputs differ by {diff}"
    return diff
