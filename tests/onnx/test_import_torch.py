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


# ----- the zoo's torchvision classifiers and Hugging Face language models ----------------
# Exported by torch.onnx.export(dynamo=False, opset 17) with a dynamic batch, loaded, and
# compared with torch at two batch sizes; one SGD step on the import lowers a loss.

def _vision():
    from lezero.testing.oracles import import_torchvision
    tv = import_torchvision().models
    from torchvision.models import convnext as tv_convnext
    cn = tv_convnext.CNBlockConfig
    return {
        "resnet18": lambda: tv.resnet18(num_classes=5),
        "resnext": lambda: tv.ResNet(tv.resnet.Bottleneck, [1, 1, 1, 1], groups=4,
                                     width_per_group=8, num_classes=5),
        "mobilenet_v2": lambda: tv.mobilenet_v2(num_classes=5, width_mult=0.25),
        "mobilenet_v3_small": lambda: tv.mobilenet_v3_small(num_classes=5, width_mult=0.5),
        "efficientnet_b0": lambda: tv.efficientnet_b0(num_classes=5),
        "convnext": lambda: tv.ConvNeXt([cn(16, 32, 1), cn(32, None, 1)], num_classes=5),
        "densenet": lambda: tv.DenseNet(growth_rate=8, block_config=(2, 2),
                                        num_init_features=16, num_classes=5),
        "squeezenet1_1": lambda: tv.squeezenet1_1(num_classes=5),
        "shufflenet_v2_x0_5": lambda: tv.shufflenet_v2_x0_5(num_classes=5),
        "vit": lambda: tv.VisionTransformer(image_size=32, patch_size=8, num_layers=2,
                                            num_heads=2, hidden_dim=16, mlp_dim=32,
                                            num_classes=5),
        "swin": lambda: tv.SwinTransformer(patch_size=[4, 4], embed_dim=16, depths=[2, 2],
                                           num_heads=[2, 4], window_size=[4, 4],
                                           stochastic_depth_prob=0.0, num_classes=5),
        # the classifiers are fixed by torchvision (25088 -> 4096 for VGG, 9216 -> 4096
        # for AlexNet): 100M and 58M parameters, a 0.4 GB and 0.2 GB file
        "vgg": lambda: tv.VGG(tv.vgg.make_layers([16, "M", 512, "M"], batch_norm=True),
                              num_classes=5),
        "alexnet": lambda: tv.AlexNet(num_classes=5),
    }


VISION = ["resnet18", "resnext", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0",
          "convnext", "densenet", "squeezenet1_1", "shufflenet_v2_x0_5", "vit", "swin",
          "vgg", "alexnet"]
# Image sizes torch.onnx can export: its adaptive average pool needs the feature map to
# be a multiple of the pool's output (7x7 for VGG, 6x6 for AlexNet).
SIZE = {"vgg": 56, "alexnet": 224}


def _torch_export(model, xs, path, names):
    dyn = {n: {0: "batch"} for n in names + ["out"]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, tuple(xs), path, dynamo=False, opset_version=17,
                          input_names=names, output_names=["out"], dynamic_axes=dyn)
    return lonnx.load(path)


def _matches_at_two_batches(model, net, make_inputs):
    for batch in (2, 3):
        xs = make_inputs(batch)
        with torch.no_grad():
            ref = model(*xs).numpy()
        with lz.no_grad():
            out = net(*[x.numpy() for x in xs]).data
        assert out.shape == ref.shape
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


def _one_sgd_step_lowers_the_loss(net, xs, target):
    """Gradients reach most initializers, and one SGD step (its size a tenth of the loss
    over the squared gradient norm, so that the first-order model holds) lowers it."""
    from lezero import optim
    loss = F.mse_loss(net(*xs), target)
    loss.backward()
    params = list(net.parameters())
    grads = [p.grad.data for p in params if p.grad is not None]
    assert sum(bool(np.any(g)) for g in grads) >= len(params) // 2
    norm2 = sum(float(np.sum(g.astype(np.float64) ** 2)) for g in grads)
    optim.SGD(params, lr=0.1 * float(loss.data) / norm2).step()
    with lz.no_grad():
        after = float(F.mse_loss(net(*xs), target).data)
    assert after < float(loss.data)


@pytest.mark.parametrize("name", VISION)
def test_torchvision_classifier_imports_with_a_dynamic_batch(tmp_path, name):
    torch.manual_seed(0)
    model = _vision()[name]().eval()
    with torch.no_grad():                       # zero-initialised heads say nothing
        for p in model.parameters():
            if not p.any():
                p.normal_(0, 0.1)
    g = torch.Generator().manual_seed(1)
    size = SIZE.get(name, 32)
    images = lambda b: [torch.randn(b, 3, size, size, generator=g)]     # noqa: E731
    net = _torch_export(model, images(2), str(tmp_path / f"{name}.onnx"), ["images"])
    _matches_at_two_batches(model, net, images)
    x = images(2)[0].numpy()
    _one_sgd_step_lowers_the_loss(net, [x], np.zeros((2, 5), np.float32))


class _HFLogits(tn.Module):
    """input_ids, attention_mask -> logits (no cache, a plain tensor out)."""

    def __init__(self, hf):
        super().__init__()
        self.hf = hf

    def forward(self, input_ids, attention_mask):
        return self.hf(input_ids=input_ids, attention_mask=attention_mask,
                       use_cache=False, return_dict=False)[0]


def _hf(name):
    from lezero.testing.oracles import import_transformers
    t = import_transformers()
    small = dict(vocab_size=99, attn_implementation="eager")
    if name == "bert":
        cfg = t.BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                           intermediate_size=37, **small)
        return t.BertForMaskedLM(cfg)
    if name == "gpt2":
        return t.GPT2LMHeadModel(t.GPT2Config(n_embd=32, n_layer=2, n_head=4, n_positions=24,
                                              **small))
    cfg = t.LlamaConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        num_key_value_heads=2, intermediate_size=37,
                        max_position_embeddings=64, **small)
    return t.LlamaForCausalLM(cfg)


@pytest.mark.parametrize("name", ["bert", "gpt2", "llama"])
def test_hugging_face_model_imports_with_a_dynamic_batch(tmp_path, name):
    torch.manual_seed(0)
    model = _HFLogits(_hf(name)).eval()
    g = torch.Generator().manual_seed(2)

    def inputs(batch):
        ids = torch.randint(0, 99, (batch, 6), generator=g)
        mask = torch.ones(batch, 6, dtype=torch.int64)
        mask[0, 4:] = 0                                    # one padded row
        return [ids, mask]
    net = _torch_export(model, inputs(2), str(tmp_path / f"{name}.onnx"),
                        ["input_ids", "attention_mask"])
    _matches_at_two_batches(model, net, inputs)
    ids, mask = (x.numpy() for x in inputs(2))
    _one_sgd_step_lowers_the_loss(net, [ids, mask], np.zeros((2, 6, 99), np.float32))
