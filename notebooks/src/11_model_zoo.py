# %% [markdown]
# # 11. The model zoo
#
# This notebook follows `steps/step38.py` to `steps/step40.py`. `lezero.nn.models` holds
# classic and modern architectures written with `lezero.nn` layers, with the layouts and
# submodule names of their PyTorch definitions (torchvision for VGG, ResNet and
# MobileNetV2; PyTorch's examples for the LSTM language model, the VAE and the DCGAN;
# nanoGPT's layout for GPT), so a PyTorch `state_dict` of the same architecture loads
# with `strict=True`. Every model here trains on data that ships with LeZero, in seconds,
# and we plot the training curves. The `examples/train_<model>.py` scripts do the same
# with flags for real runs.

# %%
import math

import numpy as np
import matplotlib.pyplot as plt
import lezero as lz
import lezero.functions as F
from lezero import optim
from lezero.data import DataLoader, TensorDataset
from lezero.data.datasets import Digits, load_corpus
from lezero.nn import models
from lezero.demo import train as train_classifier
# %matplotlib inline

# The models below are small: one BLAS and one Numba thread are as fast as several and
# much steadier on a shared machine (see lezero/demo.py).
import numba
from threadpoolctl import threadpool_limits
threadpool_limits(1)
numba.set_num_threads(1)

# %% [markdown]
# ## What is in the zoo
# Sizes at the published configurations (1000 ImageNet classes for the vision models).
# The counts equal torchvision's: ResNet-18 11,689,512, ResNet-50 25,557,032,
# MobileNetV2 3,504,872.

# %%
zoo = {
    "LeNet-5 (32x32)": lambda: models.LeNet5(),
    "VGG-11 (CIFAR head)": lambda: models.vgg11(num_classes=10, small_input=True),
    "ResNet-18": lambda: models.resnet18(),
    "ResNet-50": lambda: models.resnet50(),
    "MobileNetV2": lambda: models.mobilenet_v2(),
    "GPT-mini (2x128, vocab 256)": lambda: models.GPT(),
    "CharLSTM (256 hidden)": lambda: models.CharLSTM(vocab_size=65),
    "Seq2SeqTransformer (d 128)": lambda: models.Seq2SeqTransformer(1000, 1000),
    "VAE (784-400-20)": lambda: models.VAE(),
    "DCGAN generator (64x64)": lambda: models.DCGANGenerator(),
    "DCGAN discriminator (64x64)": lambda: models.DCGANDiscriminator(),
}
for name, build in zoo.items():
    m = build()
    print(f"{name:30s} {m.num_parameters():>12,} parameters  {len(m.state_dict()):4d} arrays")
print(list(models.resnet18().state_dict())[:6])

# %% [markdown]
# ## Classic CNNs on real digits
# scikit-learn's 8x8 handwritten digits (1,438 training and 359 test scans). LeNet-5
# pads its convolutions for such small images; a ResNet-18 at an eighth of the width,
# with the CIFAR stem, sees the digits upscaled to 16x16. Both train with Adam and a
# cosine schedule (`lezero.demo.train`, the loop behind `make demo`).

# %%
train_set, test_set = Digits(train=True), Digits(train=False)


def digits_loader(size, channels):
    x = train_set.data[:, None]
    x = np.repeat(np.repeat(x, size // 8, axis=2), size // 8, axis=3)
    x = np.ascontiguousarray(np.repeat(x, channels, axis=1))
    xt = np.repeat(np.repeat(test_set.data[:, None], size // 8, 2), size // 8, 3)
    xt = np.ascontiguousarray(np.repeat(xt, channels, axis=1))
    loader = DataLoader(TensorDataset(x, train_set.targets), batch_size=64, shuffle=True,
                        seed=0)
    return loader, (xt, test_set.targets)


lz.manual_seed(0)
runs = {}
loader, test_arrays = digits_loader(8, 1)
runs["LeNet-5"] = train_classifier(models.LeNet5(input_size=8), loader, test_arrays,
                                   epochs=15, lr=1e-2, show_progress=False)
runs["MLP 64-200-40-10"] = train_classifier(models.MLP(64, [200, 40, 10], flatten=True),
                                            loader, test_arrays, 15, 1e-2, False)
loader16, test16 = digits_loader(16, 3)
resnet = models.resnet18(num_classes=10, small_input=True, base_width=8)
runs["ResNet-18/8 (16x16)"] = train_classifier(resnet, loader16, test16, 4, 3e-3, False)
for name, h in runs.items():
    print(f"{name:22s} final test accuracy {h['test_acc'][-1]:.3f}")

# %%
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.5))
for name, h in runs.items():
    epochs = np.arange(1, len(h["train_loss"]) + 1)
    ax1.plot(epochs, h["train_loss"], marker="o", ms=3, label=name)
    ax2.plot(epochs, np.array(h["test_acc"]) * 100, marker="o", ms=3, label=name)
ax1.set(xlabel="epoch", ylabel="training cross entropy", yscale="log", title="loss")
ax2.set(xlabel="epoch", ylabel="test accuracy (%)", ylim=(60, 100), title="accuracy")
ax2.legend(loc="lower right")
plt.tight_layout()
plt.show()

# %% [markdown]
# On centred 8x8 digits an MLP is as good as LeNet-5: the images are too small for
# weight sharing to matter. The ResNet reaches the same accuracy in a few epochs,
# its batch norms and residual connections letting a deep network train quickly.
#
# ## A character-level LSTM with truncated backpropagation
# The text is cut into 16 parallel streams; each step reads 32 characters of every
# stream, carries the LSTM state to the next window and detaches it there, so the
# gradient flows through at most 32 steps while the state remembers the whole stream.

# %%
text = load_corpus()
vocab = sorted(set(text))
ids = np.array([vocab.index(c) for c in text], dtype=np.int64)
cut = int(0.9 * len(ids))
decode = lambda seq: "".join(vocab[int(i)] for i in seq)  # noqa: E731


def run_streams(model, data, opt=None, bptt=32):
    hidden, losses = None, []
    for i in range(0, data.shape[1] - 1, bptt):
        n = min(bptt, data.shape[1] - 1 - i)
        logits, hidden = model(data[:, i:i + n], hidden)
        loss = F.cross_entropy(logits.reshape(-1, len(vocab)),
                               data[:, i + 1:i + 1 + n].reshape(-1))
        if opt is not None:
            opt.zero_grad()
            loss.backward()
            optim.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
        hidden = models.CharLSTM.detach_hidden(hidden)
        losses.append(loss.item())
    return float(np.mean(losses))


lz.manual_seed(0)
train_streams = ids[:cut - cut % 16].reshape(16, -1)
val_streams = ids[cut:cut + (len(ids) - cut) // 4 * 4].reshape(4, -1)
lstm = models.CharLSTM(len(vocab), embed_dim=32, hidden_size=128)
lstm_opt = optim.Adam(lstm.parameters(), lr=5e-3)
lstm_curve = {"train": [], "val": []}
for epoch in range(30):
    lstm.train()
    lstm_curve["train"].append(run_streams(lstm, train_streams, lstm_opt))
    lstm.eval()
    with lz.no_grad():
        lstm_curve["val"].append(run_streams(lstm, val_streams))
print(f"validation loss {lstm_curve['val'][-1]:.3f} (perplexity "
      f"{math.exp(lstm_curve['val'][-1]):.1f}); sample:")
print(decode(lstm.generate(ids[:10], 150, temperature=0.8)))

# %% [markdown]
# ## GPT-mini on the same story
# Random windows of 64 characters, AdamW, 240 steps. The tied embedding and output head
# share one matrix.

# %%
lz.manual_seed(0)
gpt = models.GPT(vocab_size=len(vocab), block_size=64, n_layer=2, n_head=4, d_model=96)
gpt_opt = optim.AdamW(gpt.parameters(), lr=3e-3, betas=(0.9, 0.95), weight_decay=0.05)
rng = np.random.default_rng(0)


def windows(data, batch=16, block=64):
    starts = rng.integers(0, len(data) - block - 1, batch)
    return (np.stack([data[s:s + block] for s in starts]),
            np.stack([data[s + 1:s + block + 1] for s in starts]))


gpt_curve = {"step": [], "train": [], "val": []}
for step in range(1, 241):
    loss = gpt.loss(*windows(ids[:cut]))
    gpt_opt.zero_grad()
    loss.backward()
    gpt_opt.step()
    if step % 20 == 0:
        gpt.eval()
        with lz.no_grad():
            val = np.mean([gpt.loss(*windows(ids[cut:], 8, 48)).item() for _ in range(3)])
        gpt.train()
        gpt_curve["step"].append(step)
        gpt_curve["train"].append(loss.item())
        gpt_curve["val"].append(val)
print(f"GPT-mini: {gpt.num_parameters():,} parameters, validation loss "
      f"{gpt_curve['val'][-1]:.3f}; sample:")
print(decode(gpt.generate(ids[None, :10], 150, temperature=0.8, top_k=8)[0]))

# %%
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.5))
ax1.plot(np.arange(1, 31), lstm_curve["train"], label="train")
ax1.plot(np.arange(1, 31), lstm_curve["val"], label="validation")
ax1.set(xlabel="epoch", ylabel="cross entropy (nats/char)", title="CharLSTM (TBPTT)")
ax2.plot(gpt_curve["step"], gpt_curve["train"], label="train batch")
ax2.plot(gpt_curve["step"], gpt_curve["val"], label="validation")
ax2.set(xlabel="step", title="GPT-mini")
for ax in (ax1, ax2):
    ax.axhline(math.log(len(vocab)), color="grey", ls="--", lw=1, label="uniform guess")
    ax.legend()
plt.tight_layout()
plt.show()

# %% [markdown]
# Both overfit a 6 KB story quickly: the training loss keeps falling while the
# validation loss flattens. More text (`--text` in the examples) is the cure.
#
# ## Generative models: a VAE and a DCGAN on digits
# The VAE maximises the evidence lower bound: reconstruct the digit from a sample of
# q(z|x) while keeping q close to N(0, I). The DCGAN pits a generator of transposed
# convolutions against a convolutional discriminator.

# %%
lz.manual_seed(0)
pixels = train_set.data.reshape(-1, 64)
vae = models.VAE(in_features=64, hidden=128, latent=8)
vae_opt = optim.Adam(vae.parameters(), lr=2e-3)
vae_curve = []
for epoch in range(40):
    order, total = np.random.default_rng(epoch).permutation(len(pixels)), 0.0
    for i in range(0, len(order), 64):
        xb = pixels[order[i:i + 64]]
        recon, mu, logvar = vae(xb)
        loss = models.vae_loss(recon, xb, mu, logvar) / len(xb)
        vae_opt.zero_grad()
        loss.backward()
        vae_opt.step()
        total += loss.item() * len(xb)
    vae_curve.append(total / len(pixels))

real = train_set.data[:, None] * 2 - 1                 # [-1, 1], as Tanh outputs
gen = models.DCGANGenerator(nz=16, ngf=32, nc=1, image_size=8)
disc = models.DCGANDiscriminator(nc=1, ndf=32, image_size=8)
opt_g = optim.Adam(gen.parameters(), lr=1e-3, betas=(0.5, 0.999))
opt_d = optim.Adam(disc.parameters(), lr=1e-3, betas=(0.5, 0.999))
bce = F.binary_cross_entropy_with_logits
ones, zeros = np.ones(64, np.float32), np.zeros(64, np.float32)
gan_curve = {"D": [], "G": []}
for epoch in range(15):
    order = np.random.default_rng(epoch).permutation(len(real))
    d_losses, g_losses = [], []
    for i in range(0, len(order) - 63, 64):
        z = lz.get_rng().standard_normal((64, 16)).astype(np.float32)
        fake = gen(z)
        loss_d = bce(disc(real[order[i:i + 64]]), ones) + bce(disc(fake.detach()), zeros)
        opt_d.zero_grad()
        loss_d.backward()
        opt_d.step()
        loss_g = bce(disc(fake), ones)
        opt_g.zero_grad()
        loss_g.backward()
        opt_g.step()
        d_losses.append(loss_d.item())
        g_losses.append(loss_g.item())
    gan_curve["D"].append(np.mean(d_losses))
    gan_curve["G"].append(np.mean(g_losses))
print(f"VAE negative ELBO per digit {vae_curve[-1]:.2f}; "
      f"DCGAN losses D {gan_curve['D'][-1]:.3f}, G {gan_curve['G'][-1]:.3f}")

# %%
vae.eval()
gen.eval()
with lz.no_grad():
    vae_samples = vae.decode(lz.get_rng().standard_normal((16, 8)).astype(np.float32)).data
    gan_samples = (gen(lz.get_rng().standard_normal((16, 16)).astype(np.float32)).data + 1) / 2


def mosaic(images, cols=4, pad=1):
    """8x8 images side by side in a grid, separated by a dark line."""
    rows = -(-len(images) // cols)
    out = np.zeros((rows * (8 + pad) + pad, cols * (8 + pad) + pad))
    for k, img in enumerate(images):
        r, c = divmod(k, cols)
        out[pad + r * (8 + pad):pad + r * (8 + pad) + 8,
            pad + c * (8 + pad):pad + c * (8 + pad) + 8] = img.reshape(8, 8)
    return out


fig, axes = plt.subplots(1, 4, figsize=(13, 3), gridspec_kw={"width_ratios": [1.2, 1.2, 1, 1]})
axes[0].plot(np.arange(1, len(vae_curve) + 1), vae_curve)
axes[0].set(title="VAE: negative ELBO per digit", xlabel="epoch")
axes[1].plot(np.arange(1, 16), gan_curve["D"], label="discriminator")
axes[1].plot(np.arange(1, 16), gan_curve["G"], label="generator")
axes[1].set(title="DCGAN losses", xlabel="epoch")
axes[1].legend()
for ax, title, imgs in [(axes[2], "VAE samples from N(0, I)", vae_samples),
                        (axes[3], "DCGAN samples", gan_samples)]:
    ax.imshow(mosaic(imgs), cmap="gray", vmin=0, vmax=1)
    ax.set_title(title)
    ax.axis("off")
plt.tight_layout()
plt.show()

# %% [markdown]
# Generated 8x8 digits are rough: these are tiny networks trained for seconds. The
# `examples/` scripts take `--epochs`, wider models and, for the vision models,
# CIFAR-10 (`--data cifar10 --download`); `docs/model_zoo.md` lists what each model
# matches in PyTorch and the measured speed against it.
