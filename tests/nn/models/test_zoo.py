"""The model zoo: PyTorch layouts (state_dict keys and parameter counts), forward parity
with PyTorch for ResNet-18 and GPT-mini from shared weights, and one training step each."""
import math

import numpy as np
import pytest
import torch

import lezero as lz
import lezero.functions as F
from lezero import optim
from lezero.nn import models

tnn = torch.nn


# ----- helpers --------------------------------------------------------------------------

def torch_state_to_numpy(module):
    return {k: v.detach().numpy().copy() for k, v in module.state_dict().items()}


def randomize_batchnorm_(module, seed=0):
    """Non-trivial BN affine parameters and running statistics, so eval-mode parity
    actually tests the use of the stored statistics."""
    g = torch.Generator().manual_seed(seed)
    for m in module.modules():
        if isinstance(m, tnn.BatchNorm2d):
            with torch.no_grad():
                m.weight.copy_(1 + 0.2 * torch.randn(m.weight.shape, generator=g))
                m.bias.copy_(0.2 * torch.randn(m.bias.shape, generator=g))
                m.running_mean.copy_(0.1 * torch.randn(m.running_mean.shape, generator=g))
                m.running_var.copy_(1 + 0.5 * torch.rand(m.running_var.shape, generator=g))


def train_step(model, loss_fn, params=None, lr=1e-2):
    """One Adam step; checks that the loss is finite, every parameter got a gradient
    and moved.  Returns the loss value."""
    params = list(model.parameters()) if params is None else params
    before = [p.data.copy() for p in params]
    opt = optim.Adam(params, lr=lr)
    loss = loss_fn()
    opt.zero_grad()
    loss.backward()
    opt.step()
    value = float(loss.item())
    assert np.isfinite(value)
    names = {id(p): n for n, p in model.named_parameters()}
    for p, old in zip(params, before):
        assert p.grad is not None, f"{names.get(id(p))} got no gradient"
        assert np.all(np.isfinite(p.grad.data)), names.get(id(p))
        assert not np.array_equal(p.data, old), f"{names.get(id(p))} did not change"
    return value


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def labels(n, classes, seed=0):
    return np.random.default_rng(seed).integers(0, classes, n)


# ----- a torchvision-shaped ResNet written with torch.nn (the reference) -----------------

class TorchBasicBlock(tnn.Module):
    expansion = 1

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = tnn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = tnn.BatchNorm2d(planes)
        self.relu = tnn.ReLU()
        self.conv2 = tnn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = tnn.BatchNorm2d(planes)
        self.downsample = downsample

    def forward(self, x):
        out = self.bn2(self.conv2(self.relu(self.bn1(self.conv1(x)))))
        return self.relu(out + (x if self.downsample is None else self.downsample(x)))


class TorchResNet18(tnn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.inplanes = 64
        self.conv1 = tnn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = tnn.BatchNorm2d(64)
        self.relu = tnn.ReLU()
        self.maxpool = tnn.MaxPool2d(3, 2, 1)
        self.layer1 = self._layer(64, 1)
        self.layer2 = self._layer(128, 2)
        self.layer3 = self._layer(256, 2)
        self.layer4 = self._layer(512, 2)
        self.avgpool = tnn.AdaptiveAvgPool2d((1, 1))
        self.fc = tnn.Linear(512, num_classes)

    def _layer(self, planes, stride):
        down = None
        if stride != 1 or self.inplanes != planes:
            down = tnn.Sequential(tnn.Conv2d(self.inplanes, planes, 1, stride, bias=False),
                                  tnn.BatchNorm2d(planes))
        blocks = [TorchBasicBlock(self.inplanes, planes, stride, down),
                  TorchBasicBlock(planes, planes)]
        self.inplanes = planes
        return tnn.Sequential(*blocks)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


@pytest.fixture(scope="module")
def resnet18_pair():
    torch.manual_seed(0)
    ref = TorchResNet18(num_classes=10)
    randomize_batchnorm_(ref)
    ours = models.resnet18(num_classes=10)
    result = ours.load_state_dict(torch_state_to_numpy(ref), strict=True)
    assert result.missing_keys == [] and result.unexpected_keys == []
    return ours, ref


def test_resnet18_eval_forward_matches_torch(resnet18_pair):
    ours, ref = resnet18_pair
    x = rand(2, 3, 64, 64)
    ours.eval(), ref.eval()
    with lz.no_grad():
        y = ours(x).data
    with torch.no_grad():
        y_ref = ref(torch.from_numpy(x)).numpy()
    assert y.shape == (2, 10)
    np.testing.assert_allclose(y, y_ref, rtol=1e-4, atol=1e-4)


def test_resnet18_train_forward_and_running_stats_match_torch(resnet18_pair):
    ours, ref = resnet18_pair
    # 64x64, not 32x32: layer4 then normalises 2x2x2 values per channel, not 2, where
    # float32 results (torch's too) stray 1e-3 from float64.
    x = rand(2, 3, 64, 64, seed=1)
    ours.train(), ref.train()
    y = ours(x).data
    y_ref = ref(torch.from_numpy(x)).detach().numpy()
    np.testing.assert_allclose(y, y_ref, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(ours.layer3[1].bn2.running_mean,
                               ref.layer3[1].bn2.running_mean.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ours.bn1.running_var, ref.bn1.running_var.numpy(), rtol=1e-4)
    assert int(ours.bn1.num_batches_tracked) == int(ref.bn1.num_batches_tracked) == 1


# ----- torchvision layouts: keys and parameter counts -------------------------------------

@pytest.mark.parametrize("factory, n_keys, n_params", [
    (models.resnet18, 122, 11_689_512),
    (models.resnet50, 320, 25_557_032),
    (models.mobilenet_v2, 314, 3_504_872),
])
def test_torchvision_sizes(factory, n_keys, n_params):
    model = factory()              # 1000 classes: torchvision's published counts
    assert len(model.state_dict()) == n_keys
    assert model.num_parameters() == n_params


def test_resnet_names_follow_torchvision():
    keys = set(models.resnet50(num_classes=10, base_width=8).state_dict())
    for k in ["conv1.weight", "bn1.running_var", "layer1.0.downsample.0.weight",
              "layer1.0.downsample.1.num_batches_tracked", "layer4.2.conv3.weight",
              "layer4.2.bn3.bias", "fc.weight", "fc.bias"]:
        assert k in keys
    assert "layer2.1.downsample.0.weight" not in keys


def test_vgg16_features_and_head_follow_torchvision():
    model = models.vgg16(num_classes=10, small_input=True)
    convs = [k[:-7] for k in model.state_dict() if k.endswith(".weight")]
    assert convs == [f"features.{i}" for i in (0, 2, 5, 7, 10, 12, 14, 17, 19, 21, 24, 26,
                                               28)] + ["classifier.0", "classifier.3",
                                                       "classifier.6"]
    assert model.features.num_parameters() == 14_714_688      # VGG-16's convolutions
    bn = models.vgg11_bn(num_classes=10, width_mult=0.25, small_input=True)
    assert "features.1.running_mean" in bn.state_dict()
    assert bn.classifier[0].in_features == 128


def test_mobilenet_v2_names_follow_torchvision():
    keys = set(models.mobilenet_v2(width_mult=0.25).state_dict())
    for k in ["features.0.0.weight", "features.0.1.running_mean", "features.1.conv.0.0.weight",
              "features.1.conv.1.weight", "features.2.conv.1.0.weight",
              "features.2.conv.3.bias", "features.18.0.weight", "classifier.1.weight"]:
        assert k in keys
    model = models.mobilenet_v2(width_mult=0.25)
    depthwise = model.features[2].conv[1][0]
    assert depthwise.groups == depthwise.in_channels == depthwise.out_channels
    assert model.features[3].use_res_connect and not model.features[2].use_res_connect


def test_dcgan_64_matches_the_pytorch_example_layout():
    gen, disc = models.DCGANGenerator(), models.DCGANDiscriminator()
    assert [k for k in gen.state_dict() if k.endswith("weight")] == [
        f"main.{i}.weight" for i in (0, 1, 3, 4, 6, 7, 9, 10, 12)]
    assert [k for k in disc.state_dict() if k.endswith("weight")] == [
        f"main.{i}.weight" for i in (0, 2, 3, 5, 6, 8, 9, 11)]
    assert gen.num_parameters() == 3_576_704 and disc.num_parameters() == 2_765_568


# ----- GPT-mini against a torch model with the same layout -------------------------------

class TorchBlock(tnn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln_1 = tnn.LayerNorm(d)
        self.attn = tnn.Module()
        self.attn.c_attn = tnn.Linear(d, 3 * d)
        self.attn.c_proj = tnn.Linear(d, d)
        self.ln_2 = tnn.LayerNorm(d)
        self.mlp = tnn.Module()
        self.mlp.c_fc = tnn.Linear(d, 4 * d)
        self.mlp.c_proj = tnn.Linear(4 * d, d)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.attn.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        y = tnn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.attn.c_proj(y.transpose(1, 2).reshape(B, T, C))
        return x + self.mlp.c_proj(tnn.functional.gelu(self.mlp.c_fc(self.ln_2(x))))


class TorchGPT(tnn.Module):
    def __init__(self, vocab, block, layers, heads, d):
        super().__init__()
        self.transformer = tnn.ModuleDict(dict(
            wte=tnn.Embedding(vocab, d), wpe=tnn.Embedding(block, d),
            h=tnn.ModuleList([TorchBlock(d, heads) for _ in range(layers)]),
            ln_f=tnn.LayerNorm(d)))
        self.lm_head = tnn.Linear(d, vocab, bias=False)
        self.transformer.wte.weight = self.lm_head.weight

    def forward(self, idx):
        tr = self.transformer
        x = tr.wte(idx) + tr.wpe(torch.arange(idx.shape[1]))
        for block in tr.h:
            x = block(x)
        return self.lm_head(tr.ln_f(x))


GPT_CFG = dict(vocab_size=61, block_size=16, n_layer=2, n_head=4, d_model=32)


@pytest.fixture(scope="module")
def gpt_pair():
    torch.manual_seed(0)
    ref = TorchGPT(61, 16, 2, 4, 32)
    with torch.no_grad():                 # non-zero biases and norms: all of it is tested
        for name, p in ref.named_parameters():
            p.add_(0.05 * torch.randn_like(p))
    ours = models.GPT(**GPT_CFG)
    ours.load_state_dict(torch_state_to_numpy(ref), strict=True)
    return ours, ref


def test_gpt_forward_matches_torch(gpt_pair):
    ours, ref = gpt_pair
    idx = labels(3 * 16, 61).reshape(3, 16)
    logits = ours(idx).data
    ref_logits = ref(torch.from_numpy(idx)).detach().numpy()
    assert logits.shape == (3, 16, 61)
    np.testing.assert_allclose(logits, ref_logits, rtol=1e-4, atol=1e-4)
    # Causality: changing the last token leaves every earlier position's logits alone.
    idx2 = idx.copy()
    idx2[:, -1] = (idx2[:, -1] + 1) % 61
    np.testing.assert_allclose(ours(idx2).data[:, :-1], logits[:, :-1], atol=1e-6)


def test_gpt_loss_gradients_match_torch(gpt_pair):
    ours, ref = gpt_pair
    idx = labels(2 * 12, 61, seed=3).reshape(2, 12)
    targets = labels(2 * 12, 61, seed=4).reshape(2, 12)
    ours.zero_grad()
    loss = ours.loss(idx, targets)
    loss.backward()
    ref.zero_grad()
    ref_logits = ref(torch.from_numpy(idx))
    ref_loss = tnn.functional.cross_entropy(ref_logits.reshape(-1, 61),
                                            torch.from_numpy(targets).reshape(-1))
    ref_loss.backward()
    assert loss.item() == pytest.approx(ref_loss.item(), rel=1e-5)
    ref_params = dict(ref.named_parameters())
    for name, p in ours.named_parameters():
        np.testing.assert_allclose(p.grad.data, ref_params[name].grad.numpy(), rtol=1e-3,
                                   atol=1e-5, err_msg=name)


def test_gpt_tied_head_shares_one_parameter():
    tied = models.GPT(**GPT_CFG)
    assert tied.lm_head.weight is tied.transformer["wte"].weight
    untied = models.GPT(**GPT_CFG, tie_weights=False)
    assert untied.num_parameters() == tied.num_parameters() + 61 * 32
    assert "lm_head.weight" in tied.state_dict() and "transformer.wte.weight" in tied.state_dict()


def test_gpt_generate_shapes_top_k_and_errors():
    lz.manual_seed(0)
    gpt = models.GPT(**GPT_CFG)
    out = gpt.generate(np.array([[1, 2, 3]]), 20, temperature=0.8, top_k=5)
    assert out.shape == (1, 23) and out.dtype == np.int64
    assert np.array_equal(out[:, :3], [[1, 2, 3]])
    assert gpt.training                       # generate restores the mode
    # top_k=1 is greedy: each new token is the argmax of the logits at the previous step.
    greedy = gpt.generate(np.array([[4, 5]]), 3, top_k=1)
    with lz.no_grad():
        gpt.eval()
        for t in range(2, 5):
            assert greedy[0, t] == gpt(greedy[:, :t]).data[0, -1].argmax()
    with pytest.raises(ValueError, match="temperature"):
        gpt.generate(np.array([[1]]), 2, temperature=0)
    with pytest.raises(ValueError, match="block_size"):
        gpt(np.zeros((1, 17), np.int64))
    with pytest.raises(TypeError, match="unknown config"):
        models.GPT(n_embd=32)


# ----- one training step per model ---------------------------------------------------------

def classify(model, x, classes):
    t = labels(len(x), classes)
    return lambda: F.cross_entropy(model(x), t)


@pytest.mark.parametrize("name, build, x_shape", [
    ("mlp", lambda: models.MLP(64, [32, 16, 10], flatten=True), (4, 8, 8)),
    ("lenet_digits", lambda: models.LeNet5(input_size=8), (4, 8, 8)),
    ("lenet_32", lambda: models.LeNet5(in_channels=3, input_size=32, activation="tanh",
                                       pool="avg"), (2, 3, 32, 32)),
    ("vgg11", lambda: models.vgg11(num_classes=10, width_mult=0.125, small_input=True,
                                   hidden=32), (2, 3, 32, 32)),
    ("vgg16_bn", lambda: models.vgg16_bn(num_classes=10, width_mult=0.0625,
                                         small_input=True, hidden=16), (2, 3, 32, 32)),
    ("resnet18", lambda: models.resnet18(num_classes=10, small_input=True, base_width=8),
     (2, 3, 16, 16)),
    ("resnet34", lambda: models.resnet34(num_classes=10, base_width=4), (2, 3, 32, 32)),
    ("resnet50", lambda: models.resnet50(num_classes=10, small_input=True, base_width=4),
     (2, 3, 16, 16)),
    # 32x32, so the last stages keep 2x2 maps: at 1x1 with a batch of 2, batch norm removes
    # any per-channel shift and the biases before it get exactly zero gradient.
    ("mobilenet_v2", lambda: models.mobilenet_v2(num_classes=10, width_mult=0.25,
                                                 small_input=True), (2, 3, 32, 32)),
])
def test_classifier_training_step(name, build, x_shape):
    model = build()
    x = rand(*x_shape)
    assert model(x).shape == (x_shape[0], 10)
    train_step(model, classify(model, x, 10))


def test_classifier_learns_a_fixed_batch():
    """Several steps on one batch drive the loss down: the gradients point downhill."""
    model = models.resnet18(num_classes=4, small_input=True, base_width=4)
    x, t = rand(8, 3, 8, 8), labels(8, 4)
    opt = optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(15):
        loss = F.cross_entropy(model(x), t)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.3 * losses[0]


def test_gpt_training_step_with_dropout():
    gpt = models.GPT(**GPT_CFG, dropout=0.1, tie_weights=False)
    idx, targets = labels(32, 61).reshape(2, 16), labels(32, 61, seed=1).reshape(2, 16)
    loss = train_step(gpt, lambda: gpt.loss(idx, targets), lr=1e-3)
    assert loss == pytest.approx(math.log(61), rel=0.1)   # small init: near-uniform output


def test_char_lstm_training_step_and_state_shapes():
    model = models.CharLSTM(vocab_size=20, embed_dim=8, hidden_size=16, num_layers=2,
                            dropout=0.1)
    idx, targets = labels(3 * 7, 20).reshape(3, 7), labels(3 * 7, 20, 1).reshape(3, 7)
    logits, (h, c) = model(idx)
    assert logits.shape == (3, 7, 20) and h.shape == c.shape == (2, 3, 16)
    train_step(model, lambda: F.cross_entropy(model(idx)[0].reshape(-1, 20),
                                              targets.reshape(-1)))


def test_char_lstm_carried_state_equals_one_long_sequence():
    """Truncated BPTT keeps the forward exact: two windows with the state carried over
    give the logits of one pass over the whole sequence."""
    model = models.CharLSTM(vocab_size=11, embed_dim=6, hidden_size=8)
    model.eval()
    idx = labels(2 * 10, 11).reshape(2, 10)
    full, _ = model(idx)
    first, hidden = model(idx[:, :4])
    second, _ = model(idx[:, 4:], models.CharLSTM.detach_hidden(hidden))
    np.testing.assert_allclose(np.concatenate([first.data, second.data], axis=1), full.data,
                               rtol=1e-5, atol=1e-6)
    zero = model.init_hidden(2)
    np.testing.assert_allclose(model(idx, zero)[0].data, full.data, atol=1e-6)
    sample = model.generate(np.array([1, 2, 3]), 5)
    assert sample.shape == (8,) and sample.max() < 11
    with pytest.raises(ValueError, match="tie_weights"):
        models.CharLSTM(11, embed_dim=6, hidden_size=8, tie_weights=True)


def test_seq2seq_transformer_training_step_and_decoding():
    model = models.Seq2SeqTransformer(src_vocab=13, tgt_vocab=17, d_model=16, nhead=2,
                                      num_encoder_layers=1, num_decoder_layers=1,
                                      dim_feedforward=32, dropout=0.0)
    src, tgt = labels(2 * 6, 13).reshape(2, 6), labels(2 * 5, 17, 1).reshape(2, 5)
    assert model(src, tgt[:, :-1]).shape == (2, 4, 17)
    train_step(model, lambda: F.cross_entropy(model(src, tgt[:, :-1]).reshape(-1, 17),
                                              tgt[:, 1:].reshape(-1)))
    out = model.greedy_decode(src, max_len=6, bos=1)
    assert out.shape == (2, 6) and np.all(out[:, 0] == 1)
    # The decoder is causal: logits at position t ignore target tokens after t.
    model.eval()
    a = model(src, tgt).data
    tgt2 = tgt.copy()
    tgt2[:, -1] = (tgt2[:, -1] + 1) % 17
    np.testing.assert_allclose(model(src, tgt2).data[:, :-1], a[:, :-1], atol=1e-5)


def test_vae_training_step_and_elbo_terms():
    vae = models.VAE(in_features=64, hidden=32, latent=4)
    x = np.random.default_rng(0).random((5, 8, 8), dtype=np.float32)
    recon, mu, logvar = vae(x)
    assert recon.shape == (5, 64) and mu.shape == logvar.shape == (5, 4)

    def loss():
        recon, mu, logvar = vae(x)
        return models.vae_loss(recon, x, mu, logvar)
    train_step(vae, loss)
    # The loss is BCE(sum) + KL(q || N(0, I)); check it against the formula directly.
    vae.eval()                                # z = mu: deterministic
    recon, mu, logvar = vae(x)
    got = models.vae_loss(recon, x, mu, logvar).item()
    r, m, lv = (torch.from_numpy(a.data) for a in (recon, mu, logvar))
    want = (tnn.functional.binary_cross_entropy_with_logits(
        r, torch.from_numpy(x.reshape(5, 64)), reduction="sum")
        - 0.5 * torch.sum(1 + lv - m ** 2 - lv.exp())).item()
    assert got == pytest.approx(want, rel=1e-5)
    np.testing.assert_array_equal(vae.reparameterize(mu, logvar).data, mu.data)


def test_dcgan_generator_and_discriminator_steps():
    gen = models.DCGANGenerator(nz=8, ngf=4, nc=1, image_size=16)
    disc = models.DCGANDiscriminator(nc=1, ndf=4, image_size=16)
    z, real = rand(3, 8), np.tanh(rand(3, 1, 16, 16, seed=1))
    fake = gen(z)
    assert fake.shape == (3, 1, 16, 16) and np.abs(fake.data).max() <= 1
    assert disc(real).shape == (3,)
    bce = F.binary_cross_entropy_with_logits
    ones, zeros = np.ones(3, np.float32), np.zeros(3, np.float32)
    train_step(disc, lambda: bce(disc(real), ones) + bce(disc(gen(z).detach()), zeros))
    gen_params = list(gen.parameters())
    train_step(gen, lambda: bce(disc(gen(z)), ones), params=gen_params)
    with pytest.raises(ValueError, match="power of two"):
        models.DCGANGenerator(image_size=24)


def test_models_save_and_load_round_trip(tmp_path):
    model = models.resnet18(num_classes=3, small_input=True, base_width=4)
    model.train()
    model(rand(2, 3, 8, 8))                   # move the running statistics
    path = tmp_path / "resnet.safetensors"
    model.save(path)
    fresh = models.resnet18(num_classes=3, small_input=True, base_width=4)
    fresh.load(path)
    model.eval(), fresh.eval()
    x = rand(2, 3, 8, 8, seed=5)
    np.testing.assert_array_equal(model(x).data, fresh(x).data)


def test_lenet_rejects_bad_options():
    with pytest.raises(ValueError, match="activation"):
        models.LeNet5(activation="gelu")
    with pytest.raises(ValueError, match="input_size"):
        models.LeNet5(input_size=4)
