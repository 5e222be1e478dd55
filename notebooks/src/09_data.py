# %% [markdown]
# # 9. Feeding a model: datasets, loaders, workers
#
# This notebook follows `steps/step41.py` ... `step44.py`: datasets and transforms, the
# `DataLoader` and its worker processes, samplers and variable-length batches, and a
# training loop fed by workers. Names and arguments are those of `torch.utils.data`;
# batches are NumPy arrays.

# %%
import os
import time

import matplotlib.pyplot as plt
import numpy as np

import lezero as lz
import lezero.functions as F
from lezero.data import (BatchSampler, BucketBatchSampler, DataLoader, Dataset, PadCollate,
                         RandomSampler, get_rng, padding_waste)
from lezero.data import transforms as T
from lezero.data.datasets import DEBIAN_FASHION_MNIST, Digits, FashionMNIST
# %matplotlib inline

# %% [markdown]
# ## Datasets and transforms
# `Digits` is real data: scikit-learn's 8x8 scans of handwritten digits. A transform
# pipeline augments each sample as it is read: here a random one-pixel shift and a little
# noise. Random transforms draw from `lezero.data.get_rng()`, so a seed reproduces them.

# %%
def add_noise(image):
    return image + get_rng().normal(0, 0.05, image.shape).astype(np.float32)

lz.manual_seed(0)
plain = Digits(train=True)
augmented = Digits(train=True, transform=T.Compose([T.RandomCrop(8, padding=1),
                                                    T.Lambda(add_noise)]))
fig, axes = plt.subplots(2, 8, figsize=(10, 2.8))
for k in range(8):
    axes[0, k].imshow(plain[k][0], cmap="gray_r")
    axes[1, k].imshow(augmented[k][0], cmap="gray_r")
    axes[0, k].set_title(str(plain[k][1]))
    axes[0, k].axis("off"); axes[1, k].axis("off")
fig.suptitle("digits (top) and augmented (bottom)"); plt.show()
print(len(plain), "training images of shape", plain[0][0].shape)

# %% [markdown]
# ## Worker processes: the same batches, sooner
# Workers build batches ahead of time and hand them back through shared memory. The
# order and every augmentation come from the loader's `seed`, not from the worker that
# happens to build a batch, so 0, 1 or 2 workers give identical batches.

# %%
def batches(num_workers):
    loader = DataLoader(augmented, batch_size=64, shuffle=True, seed=10,
                        num_workers=num_workers)
    return [x for x, _ in loader]

reference = batches(0)
for w in (1, 2):
    same = all(np.array_equal(a, b) for a, b in zip(reference, batches(w)))
    print(f"num_workers={w}: identical to num_workers=0: {same}")

# %% [markdown]
# When reading a sample waits on a disk or a network, workers overlap the waiting. A
# dataset whose samples take 5 ms each (a sleep stands in for the read):

# %%
class SlowReads(Dataset):
    def __len__(self):
        return 160

    def __getitem__(self, i):
        time.sleep(0.005)
        return np.float32(i)

rates = {}
for w in (0, 1, 2, 4):
    loader = DataLoader(SlowReads(), batch_size=8, num_workers=w, persistent_workers=w > 0)
    list(loader)                                   # start the workers
    t0 = time.perf_counter()
    n = sum(len(b) for b in loader)
    rates[w] = n / (time.perf_counter() - t0)
plt.bar([str(w) for w in rates], list(rates.values()))
plt.xlabel("num_workers"); plt.ylabel("samples / s"); plt.title("I/O-bound reads")
plt.show()
print({w: round(r) for w, r in rates.items()})

# %% [markdown]
# ## Variable-length sequences: bucketing cuts the padding
# A batch of sequences is padded to its longest member. Random batches mix short and long
# sequences; `BucketBatchSampler` batches neighbours in length (still shuffled), and
# `PadCollate` pads each batch and returns a mask of the real positions.

# %%
rng = np.random.default_rng(0)
lengths = rng.integers(5, 121, size=3000)
random_batches = list(BatchSampler(RandomSampler(range(3000),
                                                 generator=np.random.default_rng(0)), 32, False))
bucketed = list(BucketBatchSampler(lengths, 32, generator=np.random.default_rng(0)))
waste = lambda bs: [padding_waste([b], lengths)["waste"] for b in bs]
plt.hist(waste(random_batches), bins=30, alpha=0.7, label="random batches")
plt.hist(waste(bucketed), bins=30, alpha=0.7, label="bucketed batches")
plt.xlabel("fraction of a batch that is padding"); plt.legend(); plt.show()
print(f"overall waste: random {padding_waste(random_batches, lengths)['waste']:.1%}, "
      f"bucketed {padding_waste(bucketed, lengths)['waste']:.1%}")
seqs = [np.arange(n) for n in (3, 1, 4)]
padded, mask = PadCollate(padding_value=-1)(seqs)
print(padded, mask, sep="\n")

# %% [markdown]
# ## A training loop fed by workers
# A two-layer network from core operators, trained on augmented digits that two
# persistent workers prepare while the main process computes gradients.

# %%
def flatten(image):
    return image.reshape(-1)

def cross_entropy(logits, t):
    z = logits - logits.data.max(axis=1, keepdims=True)
    log_probs = z - F.log(F.sum(F.exp(z), axis=1, keepdims=True))
    return -F.sum(F.get_item(log_probs, (np.arange(len(t)), t))) / len(t)

train = Digits(train=True, transform=T.Compose([T.RandomApply([T.RandomCrop(8, padding=1)], p=0.3),
                                                T.Lambda(add_noise), T.Lambda(flatten)]))
test = Digits(train=False, transform=T.Lambda(flatten))
loader = DataLoader(train, batch_size=32, shuffle=True, num_workers=2, seed=49,
                    persistent_workers=True)
r = np.random.default_rng(0)
W1 = lz.Variable((r.standard_normal((64, 64)) / 8).astype(np.float32))
b1 = lz.Variable(np.zeros(64, np.float32))
W2 = lz.Variable((r.standard_normal((64, 10)) / 8).astype(np.float32))
b2 = lz.Variable(np.zeros(10, np.float32))
params = [W1, b1, W2, b2]
model = lambda x: F.matmul(F.tanh(F.matmul(x, W1) + b1), W2) + b2

losses = []
for epoch in range(10):
    for x, t in loader:
        loss = cross_entropy(model(x), t)
        for p in params:
            p.cleargrad()
        loss.backward()
        for p in params:
            p.data -= 0.2 * p.grad.data
        losses.append(float(loss.data))
with lz.no_grad():
    x, t = next(iter(DataLoader(test, batch_size=len(test))))
    acc = float((model(x).data.argmax(axis=1) == t).mean())
plt.plot(losses, lw=0.8); plt.xlabel("step"); plt.ylabel("loss"); plt.title("training loss")
plt.show()
print(f"test accuracy {acc:.3f} on {len(test)} held-out digits")
del loader                                          # stops the persistent workers

# %% [markdown]
# ## Real Fashion-MNIST, where Debian's package is installed
# `FashionMNIST(root)` reads the four standard IDX `.gz` files from a folder, such as the
# one Debian's `dataset-fashion-mnist` package installs; with `download=True` it fetches
# and checks them instead.

# %%
if os.path.isdir(DEBIAN_FASHION_MNIST):
    fashion = FashionMNIST(DEBIAN_FASHION_MNIST, train=False)
    fig, axes = plt.subplots(1, 8, figsize=(10, 1.8))
    for k, ax in enumerate(axes):
        image, label = fashion[k]
        ax.imshow(image, cmap="gray_r"); ax.set_title(fashion.classes[label], fontsize=8)
        ax.axis("off")
    plt.show()
    print(len(fashion), "test images,", fashion[0][0].shape, fashion[0][0].dtype)
else:
    print("dataset-fashion-mnist is not installed here (apt-get install dataset-fashion-mnist)")
